"""A Prometheus `/metrics` endpoint for the processes that have no HTTP app of their own (coordinator, trainer, RQ
executor workers): prometheus_client's own HTTP server, in a daemon thread, over one process's registry.

Each process passes its own CollectorRegistry (never the library-global default), so tests and several services in
one process never collide.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from wsgiref.simple_server import WSGIServer

from prometheus_client import CollectorRegistry, start_http_server


@dataclass
class MetricsEndpoint:
    """A running metrics server; `close()` stops it and frees the port."""

    server: WSGIServer
    thread: threading.Thread

    @property
    def port(self) -> int:
        """The TCP port the server listens on."""
        return int(self.server.server_address[1])

    def close(self) -> None:
        """Stop serving and release the socket. Idempotent."""
        if self.thread.is_alive():
            self.server.shutdown()
            self.thread.join(timeout=10)
        self.server.server_close()


def serve_metrics(registry: CollectorRegistry, port: int, address: str = "0.0.0.0") -> MetricsEndpoint | None:
    """Serve `registry` at `http://address:port/metrics`; None when `port` is 0 (metrics off).

    A port already in use raises OSError naming it: a scrape target that silently is not there would be worse than a
    process that refuses to start with a wrong setting.
    """
    if port == 0:
        return None
    try:
        server, thread = start_http_server(port, addr=address, registry=registry)
    except OSError as error:
        raise OSError(error.errno, f"cannot serve metrics on {address}:{port}: {error.strerror}") from error
    return MetricsEndpoint(server, thread)
