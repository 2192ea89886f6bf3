"""Real HTTP servers for the client tests: `azr serve inference` subprocesses and a scripted misbehaving proxy."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx

REPO_ROOT = Path(__file__).resolve().parents[3]


def free_port() -> int:
    """A loopback port nobody listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class InferenceServerProcess:
    """`python -m services serve inference --model tiny` on a loopback port, killed on stop()."""

    def __init__(self, model: str = "tiny") -> None:
        """Start it; call wait_ready() before use."""
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = open(Path(os.environ.get("TMPDIR", "/tmp")) / f"azr-inference-{self.port}.log", "w+b")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "services", "serve", "inference", "--model", model, "--port", str(self.port)],
            cwd=REPO_ROOT, stdout=self.log, stderr=subprocess.STDOUT)

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

    def stop(self) -> None:
        """Terminate the server process (only this one)."""
        self.process.terminate()
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.log.close()


class ScriptedProxy:
    """A real HTTP server in front of an upstream server that misbehaves on cue.

    `script` says what to do with each successive POST /generate: "500" answers HTTP 500 without forwarding,
    "abort-first" forwards and rewrites the first returned item's finish_reason to abort, "pass" forwards as is
    (also what happens once the script is used up). Every /generate body it receives is kept in `bodies`.
    """

    def __init__(self, upstream: str, script: list[str]) -> None:
        """Start serving on a free loopback port."""
        self.upstream, self.script, self.bodies = upstream, list(script), []
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:  # keep pytest output clean
                pass

            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                action = "pass"
                if self.path == "/generate":
                    proxy.bodies.append(body)
                    action = proxy.script.pop(0) if proxy.script else "pass"
                if action == "500":
                    return self._reply(500, {"object": "error", "message": "scripted failure"})
                answer = httpx.post(proxy.upstream + self.path, json=body, timeout=120)
                payload = answer.json()
                if action == "abort-first":
                    payload[0]["meta_info"]["finish_reason"] = {"type": "abort", "message": "scripted abort"}
                self._reply(answer.status_code, payload)

            def do_GET(self) -> None:  # noqa: N802
                answer = httpx.get(proxy.upstream + self.path, timeout=120)
                self._reply(answer.status_code, answer.json())

            def _reply(self, status: int, payload: object) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        """Stop serving."""
        self.server.shutdown()
        self.server.server_close()
