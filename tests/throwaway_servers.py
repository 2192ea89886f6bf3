"""Servers a test owns outright: its own Redis and PostgreSQL (to stop and restart them), a uvicorn server on a
loopback port, `azr worker executor` subprocesses, and a private database on the shared PostgreSQL.

The shared servers (Redis 6379, PostgreSQL 5432) are used by others at the same time: outage tests stop only the
throwaway servers started here. Missing binaries skip the test (fail under AZR_REQUIRE_SERVICES=1, like conftest).
"""

from __future__ import annotations

import glob
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis
import uvicorn

from services.store.private_database import PrivateDatabase  # noqa: F401  (re-exported to the tests)

REPO_ROOT = Path(__file__).resolve().parent.parent


def skip_or_fail(reason: str) -> None:
    """Skip on a laptop; fail when AZR_REQUIRE_SERVICES=1 (the rule of tests/conftest.py, which cannot be imported
    from here: every conftest.py is a module named `conftest`)."""
    if os.environ.get("AZR_REQUIRE_SERVICES", "") == "1":
        pytest.fail(f"required service missing (AZR_REQUIRE_SERVICES=1): {reason}")
    pytest.skip(reason)


def free_port() -> int:
    """A TCP port nothing listens on right now (the OS picks it)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def wait_for(predicate: Any, seconds: float, what: str, interval_s: float = 0.05) -> None:
    """Poll `predicate` until it is truthy; AssertionError naming `what` after `seconds`."""
    deadline = time.monotonic() + seconds
    while not predicate():
        assert time.monotonic() < deadline, f"timed out after {seconds} s waiting for {what}"
        time.sleep(interval_s)


class ThrowawayRedis:
    """A `redis-server` subprocess on a free port; stop and start it at will. No persistence, unless `aof`: then an
    append-only file fsynced at every write in a private directory, so a restart finds everything written before."""

    def __init__(self, aof: bool = False) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            skip_or_fail("redis-server is not installed")
        self.binary = str(binary)
        self.port = free_port()
        self.process: subprocess.Popen[bytes] | None = None
        self.data_dir = tempfile.mkdtemp(prefix="azr-redis-") if aof else None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        """Start it and wait until it answers PING."""
        persistence = (["--appendonly", "yes", "--appendfsync", "always", "--dir", self.data_dir]
                       if self.data_dir else ["--appendonly", "no"])
        self.process = subprocess.Popen(
            [self.binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", *persistence,
             "--daemonize", "no"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        client = redis.Redis.from_url(self.url, socket_connect_timeout=0.5)
        try:
            wait_for(lambda: _answers(client), 20, f"redis on port {self.port}")
        finally:
            client.close()

    def stop(self) -> None:
        """SIGKILL it (an outage, not a clean shutdown)."""
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=10)
        self.process = None


def _answers(client: redis.Redis) -> bool:
    try:
        return bool(client.ping())
    except redis.RedisError:
        return False


def postgres_binaries() -> Path:
    """The directory of `initdb` and `pg_ctl` (Debian: /usr/lib/postgresql/<version>/bin)."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"))
    if not found:
        skip_or_fail("PostgreSQL server binaries (initdb, pg_ctl) are not installed")
    return Path(found[-1]).parent


class ThrowawayPostgres:
    """A PostgreSQL cluster in a temporary directory, run as the `postgres` OS user (initdb refuses root)."""

    def __init__(self) -> None:
        self.bin = postgres_binaries()
        self.port = free_port()
        self.directory = Path(tempfile.mkdtemp(prefix="azr-pg-"))
        self.data = self.directory / "data"
        self._as_postgres = [] if os.geteuid() != 0 else ["runuser", "-u", "postgres", "--"]
        if self._as_postgres:
            shutil.chown(self.directory, "postgres", "postgres")
        self._run(str(self.bin / "initdb"), "-D", str(self.data), "-U", "postgres", "--auth=trust", "-E", "UTF8",
                  "--no-sync")

    @property
    def url(self) -> str:
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/postgres"

    def start(self) -> None:
        """Start the cluster and wait until it accepts connections."""
        options = f"-p {self.port} -k {self.directory} -c listen_addresses=127.0.0.1 -c fsync=off"
        self._run(str(self.bin / "pg_ctl"), "-D", str(self.data), "-o", options, "-l", str(self.directory / "log"),
                  "-w", "-t", "60", "start")

    def stop(self) -> None:
        """Stop it at once (`-m immediate`: an outage, connections are cut)."""
        self._run(str(self.bin / "pg_ctl"), "-D", str(self.data), "-m", "immediate", "-w", "stop", check=False)

    def destroy(self) -> None:
        """Stop it and remove its files."""
        self.stop()
        shutil.rmtree(self.directory, ignore_errors=True)

    def _run(self, *command: str, check: bool = True) -> None:
        result = subprocess.run([*self._as_postgres, *command], capture_output=True, text=True, timeout=120)
        if check and result.returncode != 0:
            output = result.stderr.strip() or result.stdout.strip()
            raise RuntimeError(f"{command[0]} failed ({result.returncode}): {output}")


class LoopbackServer:
    """A real uvicorn server for `app` on 127.0.0.1:<free port>, in a thread of this process."""

    def __init__(self, app: Any) -> None:
        self.port = free_port()
        config = uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning", lifespan="off")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, name=f"uvicorn-{self.port}", daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> str:
        self.thread.start()
        wait_for(lambda: self.server.started, 30, f"uvicorn on port {self.port}")
        return self.url

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=30)


class ExecutorWorkers:
    """`azr worker executor` subprocesses serving one private RQ queue; all stopped at the end."""

    def __init__(self, redis_url: str, queue: str | None = None, timeout_s: float = 8) -> None:
        self.redis_url = redis_url
        self.queue = queue or f"executor-test-{uuid.uuid4().hex[:8]}"
        self.timeout_s = timeout_s
        self.processes: list[subprocess.Popen[bytes]] = []

    def start(self, name: str) -> subprocess.Popen[bytes]:
        """Start one worker (one sandbox worker inside), with a 1 s maintenance interval for quick retries."""
        env = {**os.environ, "AZR_REDIS_URL": self.redis_url, "AZR_EXECUTOR_BACKEND": "process",
               "AZR_EXECUTOR_WORKERS": "1", "AZR_EXECUTOR_TIMEOUT_S": str(self.timeout_s)}
        command = [sys.executable, "-m", "azr", "worker", "executor", "--queue", self.queue,
                   "--name", f"{self.queue}-{name}-{uuid.uuid4().hex[:4]}", "--maintenance-interval-s", "1"]
        process = subprocess.Popen(command, env=env, cwd=REPO_ROOT, start_new_session=True,
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.processes.append(process)
        return process

    def registered(self, connection: Any) -> int:
        """How many live RQ workers listen on this queue (a started worker registers once its imports are done)."""
        from rq import Queue, Worker

        return len(Worker.all(queue=Queue(self.queue, connection=connection)))

    def kill(self, process: subprocess.Popen[bytes]) -> None:
        """SIGKILL a worker and its sandbox children."""
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=10)

    def stop_all(self) -> None:
        """SIGTERM every worker still running (SIGKILL after 15 s)."""
        for process in self.processes:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGTERM)
                try:
                    process.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    os.killpg(process.pid, signal.SIGKILL)
                    process.wait()


def throwaway_redis(aof: bool = False) -> Iterator[ThrowawayRedis]:
    """Generator body for a fixture: a started ThrowawayRedis, killed afterwards (its data directory removed)."""
    server = ThrowawayRedis(aof=aof)
    server.start()
    try:
        yield server
    finally:
        server.stop()
        if server.data_dir is not None:
            shutil.rmtree(server.data_dir, ignore_errors=True)


def throwaway_postgres() -> Iterator[ThrowawayPostgres]:
    """Generator body for a fixture: a started ThrowawayPostgres, destroyed afterwards."""
    server = ThrowawayPostgres()
    try:
        server.start()
        yield server
    finally:
        server.destroy()


def answers_ok(url: str) -> bool:
    """Whether a GET of ``url`` answers 200 within 2 s (a server's /health or /readyz while it starts)."""
    try:
        return httpx.get(url, timeout=2).status_code == 200
    except httpx.HTTPError:
        return False
