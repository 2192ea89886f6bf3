"""`azr serve inference` as a real subprocess on a loopback port, for the tests of the SGLang client, the trainer's
weight push and the generation benches: start, wait until it answers, stop, and restart on the same port (what a
crashed SGLang pod does: it comes back serving the base model as weight version "0")."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

REPO_ROOT = Path(__file__).resolve().parent.parent


def free_port() -> int:
    """A loopback port nobody listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class InferenceServerProcess:
    """`python -m azr serve inference --model MODEL` on a loopback port, killed on stop()."""

    def __init__(self, model: str = "tiny", *, port: int | None = None, env: dict[str, str] | None = None) -> None:
        """Start it (on `port`, else a free one; `env` adds variables, e.g. AZR_SGLANG_ADMIN_API_KEY); call
        wait_ready() before use."""
        self.model = model
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        # float32 weights unless `env` says otherwise: tests compare the served numbers with an in-process engine's
        self.env = {**os.environ, "AZR_LOCAL_ENGINE_DTYPE": "float32", **(env or {})}
        self.log = open(Path(os.environ.get("TMPDIR", "/tmp")) / f"azr-inference-{self.port}.log", "w+b")
        self.process = self._spawn()

    def _spawn(self) -> subprocess.Popen[bytes]:
        return subprocess.Popen(
            [sys.executable, "-m", "azr", "serve", "inference", "--model", self.model, "--port", str(self.port)],
            cwd=REPO_ROOT, stdout=self.log, stderr=subprocess.STDOUT, env=self.env)

    def wait_ready(self, timeout_s: float = 180.0) -> None:
        """Block until /healthz answers; RuntimeError with the server log if it died or never came up."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                break
            try:
                if httpx.get(self.url + "/healthz", timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.3)
        self.log.seek(0)
        raise RuntimeError(f"inference server did not come up: {self.log.read().decode(errors='replace')[-3000:]}")

    def kill(self) -> None:
        """Terminate this server process (only this one) and wait for it; the port is free again after."""
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    def restart(self) -> None:
        """Start a fresh server on the same port (the previous one must be dead); call wait_ready() after."""
        if self.process.poll() is None:
            raise RuntimeError("restart() needs the previous server dead: call kill() first")
        self.process = self._spawn()

    def stop(self) -> None:
        """Kill the server and close its log."""
        self.kill()
        self.log.close()
