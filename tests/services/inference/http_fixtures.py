"""Real HTTP servers for the client tests: `azr serve inference` subprocesses and a scripted misbehaving proxy."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
from inference_servers import InferenceServerProcess, free_port

__all__ = ["InferenceServerProcess", "ScriptedProxy", "free_port"]


class ScriptedProxy:
    """A real HTTP server in front of an upstream server that misbehaves on cue.

    `script` says what to do with each successive POST /generate: "500" answers HTTP 500 without forwarding,
    "abort-first" forwards and rewrites the first returned item's finish_reason to abort, "abort-half" forwards and
    turns the first returned item into what an abort-mode pause returns mid-generation (finish_reason abort, only
    the first half of its output ids, logprobs and text), "slow" waits `slow_s` seconds before forwarding (longer
    than a client's timeout), "pass" forwards as is (also what happens once the script is used up). Every /generate
    body it receives is kept in `bodies`, in arrival order, and every answered one with its reply in `exchanges`
    (body, items as a list), in the order the replies went out.
    """

    def __init__(self, upstream: str, script: list[str], slow_s: float = 3.0) -> None:
        """Start serving on a free loopback port."""
        self.upstream, self.script, self.bodies, self.slow_s = upstream, list(script), [], slow_s
        self.exchanges: list[tuple[dict, list[dict]]] = []
        self.lock = threading.Lock()
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:  # keep pytest output clean
                pass

            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                action = "pass"
                if self.path == "/generate":
                    with proxy.lock:
                        proxy.bodies.append(body)
                        action = proxy.script.pop(0) if proxy.script else "pass"
                if action == "500":
                    return self._reply(500, {"object": "error", "message": "scripted failure"})
                if action == "slow":
                    time.sleep(proxy.slow_s)
                answer = httpx.post(proxy.upstream + self.path, json=body, timeout=120)
                payload = answer.json()
                if action == "abort-first":
                    payload[0]["meta_info"]["finish_reason"] = {"type": "abort", "message": "scripted abort"}
                if action == "abort-half":
                    first, half = payload[0], len(payload[0]["output_ids"]) // 2
                    first["output_ids"] = first["output_ids"][:half]
                    meta = first["meta_info"]
                    meta["output_token_logprobs"] = meta["output_token_logprobs"][:half]
                    meta["completion_tokens"] = half
                    meta["finish_reason"] = {"type": "abort", "message": "scripted abort"}
                    first["text"] = ""  # the client must not rely on an aborted piece's text
                if self.path == "/generate" and answer.status_code == 200:
                    with proxy.lock:
                        proxy.exchanges.append((body, payload if isinstance(payload, list) else [payload]))
                self._reply(answer.status_code, payload)

            def do_GET(self) -> None:  # noqa: N802
                answer = httpx.get(proxy.upstream + self.path, timeout=120)
                self._reply(answer.status_code, answer.json())

            def _reply(self, status: int, payload: object) -> None:
                data = json.dumps(payload).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):  # the client timed out ("slow") and left
                    pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        """Stop serving."""
        self.server.shutdown()
        self.server.server_close()
