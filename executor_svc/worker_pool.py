"""A pool of long-lived workers sharing one hash seed: thread-safe checkout, handshake, recycling, one retry.

Works over any channel factory `Callable[[int hash_seed], WorkerChannel]` (the process backend, the docker backend).
Retry policy: when a worker dies, breaks the protocol or stops answering while serving a request, it is discarded and
the request runs once more on a fresh worker; if that one is lost too, the program is to blame (`WorkerCrashed`).
A worker that cannot be started or fails its handshake is an infrastructure fault (`SandboxUnavailable`). A worker
is replaced after `recycle_after` jobs. Each slot keeps its place in the pool: a failed start empties the slot, and
the next request that checks it out tries again.
"""

from __future__ import annotations

import itertools
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from executor_svc.channel import ReplyTimeout, WorkerChannel, WorkerLost
from executor_svc.errors import ExecutorClosed, SandboxUnavailable, WorkerCrashed
from executor_svc.wire_types import JsonObject
from executor_svc.worker import PROTOCOL_VERSION, RunRequest

ChannelFactory = Callable[[int], WorkerChannel]
"""Starts one worker whose interpreter runs with the given PYTHONHASHSEED."""

HANDSHAKE_TIMEOUT_S = 60.0  # a cold container start can take seconds


@dataclass
class PoolStats:
    """Counters for /readyz, metrics and tests."""

    started: int = 0
    lost: int = 0
    recycled: int = 0
    requests: int = 0


class _Slot:
    """One place in the pool; holds a live channel or None."""

    def __init__(self) -> None:
        self.channel: WorkerChannel | None = None
        self.jobs = 0


class WorkerPool:
    """`size` workers started with PYTHONHASHSEED=`hash_seed`; `request()` may be called from many threads."""

    def __init__(self, factory: ChannelFactory, *, hash_seed: int, size: int, recycle_after: int,
                 handshake_timeout_s: float = HANDSHAKE_TIMEOUT_S) -> None:
        if size < 1 or recycle_after < 1:
            raise ValueError("size and recycle_after must be >= 1")
        self.hash_seed = hash_seed
        self.recycle_after = recycle_after
        self.str_hash: int | None = None  # hash("azr-probe") reported by the first worker; all must agree
        self.stats = PoolStats()
        self._factory = factory
        self._handshake_timeout_s = handshake_timeout_s
        self._slots = [_Slot() for _ in range(size)]
        self._idle: queue.Queue[_Slot] = queue.Queue()
        for slot in self._slots:
            self._idle.put(slot)
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self._closed = False

    def start(self) -> None:
        """Start every worker now (spawn all, then collect the handshakes) so a broken sandbox fails loudly here."""
        pending = []
        try:
            for slot in self._slots:
                channel = self._spawn()
                slot.channel = channel
                channel.send(self._ping())
                pending.append(channel)
            for channel in pending:
                self._check_handshake(channel, channel.receive(self._handshake_timeout_s))
        except (WorkerLost, ReplyTimeout) as exc:
            self.close()
            raise SandboxUnavailable(f"a worker with PYTHONHASHSEED={self.hash_seed} failed to start: {exc}") from exc
        except BaseException:
            self.close()
            raise

    def request(self, message: RunRequest, reply_timeout_s: float, jobs: int = 1) -> JsonObject:
        """Send one request to an idle worker and return its reply (`ok` is true)."""
        if self._closed:
            raise ExecutorClosed("the executor is closed")
        slot = self._idle.get()
        try:
            return self._serve(slot, message, reply_timeout_s, jobs)
        finally:
            if self._closed:
                self._discard(slot)
            self._idle.put(slot)

    def busy_workers(self) -> int:
        """Workers serving a request now (a snapshot: it may change as soon as it is read)."""
        return len(self._slots) - self._idle.qsize()

    def worker_pids(self) -> list[int]:
        """Host pids of the live workers (bwrap's or the container client's pid), where the channel has one."""
        with self._lock:
            channels = [slot.channel for slot in self._slots if slot.channel is not None]
        return [pid for pid in (getattr(channel, "pid", None) for channel in channels) if isinstance(pid, int)]

    def _serve(self, slot: _Slot, message: RunRequest, reply_timeout_s: float, jobs: int) -> JsonObject:
        failure: Exception | None = None
        for _attempt in range(2):
            channel = self._ensure(slot)
            request = dict(message, v=PROTOCOL_VERSION, id=next(self._ids))
            try:
                channel.send(request)
                reply = channel.receive(reply_timeout_s)
                if reply.get("fatal"):  # the worker failed on its own side and exits
                    self._discard(slot)
                    raise SandboxUnavailable(f"the worker failed: {reply.get('error')}")
                if reply.get("v") != PROTOCOL_VERSION or reply.get("id") != request["id"]:
                    raise WorkerLost(f"reply does not match the request: {str(reply)[:200]}")
            except (WorkerLost, ReplyTimeout) as exc:
                failure = exc
                with self._lock:
                    self.stats.lost += 1
                self._discard(slot)
                if self._closed:
                    raise ExecutorClosed("the executor was closed during the request") from exc
                continue
            if not reply.get("ok"):
                raise SandboxUnavailable(f"the worker refused the request: {reply.get('error')}")
            with self._lock:
                self.stats.requests += 1
            slot.jobs += jobs
            if slot.jobs >= self.recycle_after:
                with self._lock:
                    self.stats.recycled += 1
                self._discard(slot)
            return reply
        raise WorkerCrashed(f"the task took down its worker twice: {failure}")

    def _ensure(self, slot: _Slot) -> WorkerChannel:
        """The slot's live channel, starting (and handshaking) a fresh worker when it has none."""
        if self._closed:
            raise ExecutorClosed("the executor is closed")
        if slot.channel is None or not slot.channel.alive():
            self._discard(slot)
            channel = self._spawn()
            try:
                channel.send(self._ping())
                self._check_handshake(channel, channel.receive(self._handshake_timeout_s))
            except (WorkerLost, ReplyTimeout) as exc:
                channel.close()
                raise SandboxUnavailable(f"a fresh worker failed its handshake: {exc}") from exc
            slot.channel, slot.jobs = channel, 0
        return slot.channel

    def _spawn(self) -> WorkerChannel:
        try:
            channel = self._factory(self.hash_seed)
        except SandboxUnavailable:
            raise
        except Exception as exc:  # whatever the backend raised, it is an infrastructure fault
            raise SandboxUnavailable(f"cannot start a worker: {type(exc).__name__}: {exc}") from exc
        with self._lock:
            self.stats.started += 1
        return channel

    @staticmethod
    def _ping() -> JsonObject:
        return {"v": PROTOCOL_VERSION, "id": "hello", "op": "ping"}

    def _check_handshake(self, channel: WorkerChannel, reply: JsonObject) -> None:
        """The worker speaks our protocol and really runs under our hash seed (not ignored as under `-I`)."""
        problem = None
        if reply.get("v") != PROTOCOL_VERSION or not reply.get("ok"):
            problem = f"bad handshake {str(reply)[:200]}"
        elif reply.get("hash_seed") != str(self.hash_seed) or reply.get("ignore_environment"):
            problem = f"worker ignores PYTHONHASHSEED={self.hash_seed}: {str(reply)[:200]}"
        else:
            with self._lock:
                if self.str_hash is None:
                    self.str_hash = reply.get("str_hash")
                elif reply.get("str_hash") != self.str_hash:
                    problem = "two workers with the same PYTHONHASHSEED hash strings differently"
        if problem:
            channel.close()
            raise SandboxUnavailable(problem)

    def _discard(self, slot: _Slot) -> None:
        with self._lock:
            channel, slot.channel, slot.jobs = slot.channel, None, 0
        if channel is not None:
            channel.close()

    def close(self, wait_s: float = 30.0) -> None:
        """Stop every worker; requests in flight get up to `wait_s` to finish first. Idempotent."""
        self._closed = True
        deadline = time.monotonic() + wait_s
        returned = []
        for _ in self._slots:
            try:
                returned.append(self._idle.get(timeout=max(0.0, deadline - time.monotonic())))
            except queue.Empty:
                break
        for slot in self._slots:  # those still out past the deadline are closed under their users' feet
            self._discard(slot)
        for slot in returned:
            self._idle.put(slot)
