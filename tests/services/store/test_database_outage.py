"""A store with `outage_s` rides through a PostgreSQL outage (the server unreachable for 2 s, its connections cut)
with retries and a log line; with 0 it fails at once. The outage is a TCP forwarder in front of the real server
that the test stops and starts (the shared server itself keeps running for the other tests)."""

from __future__ import annotations

import logging
import socket
import threading
import time
from collections.abc import Iterator

import pytest
from sqlalchemy.engine import make_url
from sqlalchemy.exc import OperationalError

from services.algorithm.task_types import TaskType
from services.records import Triplet, TripletSource
from services.store import open_store


class TcpForwarder:
    """127.0.0.1:<port> -> the database; `down()` refuses new connections and cuts the open ones, `up()` listens
    again on the same port."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self.port = 0
        self.pairs: list[socket.socket] = []
        self.lock = threading.Lock()
        self.listener: socket.socket | None = None
        self.up()

    def up(self) -> None:
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(16)
        self.port = listener.getsockname()[1]
        self.listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()

    def down(self) -> None:
        assert self.listener is not None
        try:
            self.listener.shutdown(socket.SHUT_RDWR)  # wakes the accept() blocked on it (close alone would not)
        except OSError:
            pass
        self.listener.close()
        self.listener = None
        with self.lock:
            for sock in self.pairs:
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                sock.close()
            self.pairs.clear()

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return
            server = socket.create_connection(self.target)
            with self.lock:
                self.pairs += [client, server]
            for a, b in ((client, server), (server, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def _pipe(source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass
        for sock in (source, sink):
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


@pytest.fixture
def forwarded_url(private_postgres_url: str) -> Iterator[tuple[str, TcpForwarder]]:
    url = make_url(private_postgres_url)
    forwarder = TcpForwarder((url.host or "127.0.0.1", url.port or 5432))
    yield url.set(host="127.0.0.1", port=forwarder.port).render_as_string(hide_password=False), forwarder
    if forwarder.listener is not None:
        forwarder.down()


def triplet(n: int) -> Triplet:
    return Triplet(buffer=TaskType.DEDUCTION, program=f"def f(x):\n    return x + {n}", input="1",
                   output=repr(1 + n), source=TripletSource.USER)


def test_a_two_second_outage_is_ridden_through_with_a_log_line(
        forwarded_url: tuple[str, TcpForwarder], caplog: pytest.LogCaptureFixture) -> None:
    url, forwarder = forwarded_url
    store = open_store(url, outage_s=30.0)
    try:
        store.insert_triplet(triplet(1))
        before = store.count(TaskType.DEDUCTION)
        forwarder.down()
        threading.Timer(2.0, forwarder.up).start()
        began = time.monotonic()
        with caplog.at_level(logging.WARNING, logger="services.store.engine"):
            assert store.insert_triplet(triplet(2)).created
            assert store.count(TaskType.DEDUCTION) == before + 1
        assert 1.5 < time.monotonic() - began < 30
        assert any("database unavailable during insert_triplet" in r.getMessage() for r in caplog.records), caplog.text
    finally:
        store.close()


def test_without_an_outage_allowance_the_error_goes_up_at_once(forwarded_url: tuple[str, TcpForwarder]) -> None:
    url, forwarder = forwarded_url
    store = open_store(url)  # outage_s 0: the APIs' store, which answers 503 instead of waiting
    try:
        store.count(TaskType.DEDUCTION)
        forwarder.down()
        began = time.monotonic()
        with pytest.raises(OperationalError):
            store.count(TaskType.DEDUCTION)
        assert time.monotonic() - began < 10
    finally:
        store.close()


