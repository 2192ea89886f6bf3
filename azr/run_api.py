"""The HTTP side of `azr run`: the proposer API (buffers, seeds, runs, `/dashboard`) and Prometheus `/metrics`,
served on loopback from a background thread over the run's own store and executor.

Why in-process: on a laptop the embedded run is one process with a SQLite file; a second `azr serve proposer` would
need its own executor and would not see the coordinator's metrics. The server thread only reads and inserts
through the same thread-safe store the loop uses; it never touches the model.
"""

from __future__ import annotations

import os
import secrets
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry
from pydantic import SecretStr

from services.ports import CodeExecutor, TripletStore
from services.settings import ApiSettings, Settings

if TYPE_CHECKING:
    import uvicorn


@dataclass
class RunApi:
    """A running server: where it listens, how a client authenticates (`token_source`, safe to print: never the
    token itself) and how to stop it."""

    url: str
    token: str
    token_source: str
    _server: uvicorn.Server
    _thread: threading.Thread

    def close(self, timeout_s: float = 10.0) -> None:
        """Stop accepting requests, let in-flight ones finish, join the thread."""
        self._server.should_exit = True
        self._thread.join(timeout_s)


def port_is_free(host: str, port: int) -> bool:
    """Whether `port` can be bound on `host` now (a busy port is reported, not fatal, for `azr run`)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError:
            return False
    return True


def session_settings(settings: ApiSettings) -> ApiSettings:
    """The API settings the server runs with: the user's token, or, when it is the placeholder, a random one for
    this session (a write route must never accept a well-known secret, even on loopback)."""
    if not settings.uses_default_secret():
        return settings
    return settings.model_copy(update={"api_token": SecretStr(secrets.token_urlsafe(24))})


def write_session_token(settings: ApiSettings, served: ApiSettings, run_dir: Path) -> str:
    """Where a client finds the token to send, said without the token (run logs are shared and kept): the user's own
    `AZR_API_TOKEN`, or this session's random one written to `RUN_DIR/api-token`, readable by its owner only."""
    if served is settings:
        return "your AZR_API_TOKEN"
    path = run_dir / "api-token"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.unlink(missing_ok=True)  # a fresh file, so the mode below is its mode from the first byte
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "w") as handle:
        handle.write(served.api_token.get_secret_value() + "\n")
    return f"the token in {path}"


def start_run_api(settings: Settings, store: TripletStore, executor: CodeExecutor, registry: CollectorRegistry,
                  say: Callable[[str], None], *, host: str = "127.0.0.1", port: int | None = None,
                  startup_timeout_s: float = 20.0) -> RunApi | None:
    """Serve the proposer app over `store`/`executor` with `registry` as its `/metrics`; None (and a message) when
    the port is 0 or busy."""
    import uvicorn

    from proposer_api.app import create_proposer_app

    port = settings.observability.run_api_port if port is None else port
    if port == 0:
        return None
    if not port_is_free(host, port):
        say(f"dashboard not served: port {port} is busy (set AZR_RUN_API_PORT, 0 = off)")
        return None
    served = session_settings(settings.api)
    app = create_proposer_app(served, settings.rollout, store, executor, registry=registry)
    server = uvicorn.Server(uvicorn.Config(app, host=host, port=port, log_level="warning", lifespan="off"))
    thread = threading.Thread(target=server.run, name="azr-run-api", daemon=True)
    thread.start()
    deadline = time.monotonic() + startup_timeout_s
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            server.should_exit = True
            say(f"dashboard not served: the server on {host}:{port} did not start")
            return None
        time.sleep(0.05)
    return RunApi(url=f"http://{host}:{port}", token=served.api_token.get_secret_value(),
                  token_source=write_session_token(settings.api, served, settings.run.run_dir), _server=server,
                  _thread=thread)
