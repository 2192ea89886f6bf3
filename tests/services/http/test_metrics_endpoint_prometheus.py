"""The metrics endpoint of the processes without an HTTP app: off at port 0, serves its own registry only, refuses a
busy port loudly, and frees the port on close."""

from __future__ import annotations

import socket

import httpx
import pytest
from prometheus_client import CollectorRegistry, Counter
from prometheus_scrape import scrape, value
from throwaway_servers import free_port

from services.http.metrics_endpoint import serve_metrics


def test_port_zero_means_off() -> None:
    assert serve_metrics(CollectorRegistry(), 0) is None


def test_serves_its_registry_and_frees_the_port_on_close() -> None:
    registry = CollectorRegistry()
    Counter("azr_test_events", "events", registry=registry).inc(3)
    port = free_port()
    endpoint = serve_metrics(registry, port, "127.0.0.1")
    assert endpoint is not None and endpoint.port == port
    samples = scrape(f"http://127.0.0.1:{port}/metrics")
    assert value(samples, "azr_test_events_total") == 3
    assert not any(name.startswith("python_gc") for name, _ in samples), "the global default registry leaked in"
    endpoint.close()
    endpoint.close()  # idempotent
    with pytest.raises(httpx.TransportError):
        httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=2)
    again = serve_metrics(registry, port, "127.0.0.1")
    assert again is not None
    again.close()


def test_a_busy_port_is_refused_with_its_number() -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        with pytest.raises(OSError, match=f"cannot serve metrics on 127.0.0.1:{port}"):
            serve_metrics(CollectorRegistry(), port, "127.0.0.1")
