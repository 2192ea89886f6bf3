"""`azr serve inference` started by a bench script: a subprocess on a free loopback port, stopped on exit."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from types import TracebackType

import httpx

REPO_ROOT = Path(__file__).resolve().parent.parent


class ServedModel:
    """`python -m azr serve inference --model MODEL` on a free port, as a context manager."""

    def __init__(self, model: str, *, env: dict[str, str] | None = None, ready_s: float = 900.0) -> None:
        self.model, self.env, self.ready_s = model, {**os.environ, **(env or {})}, ready_s
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            self.port = sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.process: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> ServedModel:
        self.process = subprocess.Popen([sys.executable, "-m", "azr", "serve", "inference", "--model",
                                         self.model, "--port", str(self.port)], cwd=REPO_ROOT, env=self.env,
                                        stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + self.ready_s
        while time.monotonic() < deadline and self.process.poll() is None:
            try:
                if httpx.get(self.url + "/healthz", timeout=2).status_code == 200:
                    return self
            except httpx.HTTPError:
                time.sleep(0.5)
        self.__exit__(None, None, None)
        raise RuntimeError(f"azr serve inference --model {self.model} did not come up")

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
