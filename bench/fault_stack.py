"""The distributed profile on loopback for bench/faults.py, every piece a process of its own and restarted by a
supervisor the way compose's `restart: on-failure` restarts a container.

Servers: a throwaway `redis-server` with its append-only file (fsync at every write) on a spare port, and a private
PostgreSQL cluster (initdb/pg_ctl in a temporary directory, a spare port), so that both can be SIGKILLed and
restarted without touching the machine's own servers. Services, each `python -m azr ...` in its own process group:
an RQ executor worker, `azr serve inference --model tiny`, the proposer and solver APIs, `azr trainer` and
`azr coordinator --steps N` (N is the run's target, a total).

The supervisor restarts a service that exits with a non-zero status (SIGKILL included) and leaves one that exits 0
(the coordinator at its target step). Every start, exit and restart is kept with its time for the fault table.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT / "tests"))  # the throwaway servers the tests use (tests/throwaway_servers.py)

from throwaway_servers import ThrowawayPostgres, ThrowawayRedis, answers_ok, free_port  # noqa: E402

TINY_RUN = {"AZR_EXECUTOR_BACKEND": "process", "AZR_EXECUTOR_WORKERS": "1", "AZR_MODEL": "tiny",
            "AZR_MAX_RESPONSE_TOKENS": "16", "AZR_LEARNABILITY_SAMPLES": "2", "AZR_SEED_MAX_ROUNDS": "1",
            "AZR_MAX_STALENESS": "0", "AZR_MICRO_BATCH_SIZE": "4", "AZR_CHECKPOINT_EVERY": "1",
            "AZR_KEEP_CHECKPOINTS": "100000",  # every checkpoint stays: their applied-episode ids are the ledger
            "AZR_SERVER_CHECK_EVERY_S": "1", "AZR_REDIS_OUTAGE_S": "60"}


@dataclass
class Event:
    at: float  # time.time()
    service: str
    what: str  # "start", "exit <rc>", "restart"


@dataclass
class Service:
    name: str
    args: list[str]
    process: subprocess.Popen[bytes] | None = None
    starts: int = 0
    done: bool = False  # exited 0: not restarted


@dataclass
class Supervisor:
    """Starts the services and restarts any that exits non-zero (checked every `interval_s`)."""

    env: dict[str, str]
    logs: Path
    interval_s: float = 0.2
    services: dict[str, Service] = field(default_factory=dict)
    events: list[Event] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self, name: str, *args: str) -> Service:
        with self._lock:
            service = self.services.setdefault(name, Service(name, list(args)))
            self._spawn(service)
            return service

    def _spawn(self, service: Service) -> None:
        log = open(self.logs / f"{service.name}.log", "ab")
        log.write(f"\n===== start {service.starts + 1} at {time.strftime('%H:%M:%S')} =====\n".encode())
        log.flush()
        service.process = subprocess.Popen([sys.executable, "-m", "azr", *service.args], env=self.env,
                                           cwd=self.env["PWD"], stdout=log, stderr=subprocess.STDOUT,
                                           start_new_session=True)
        log.close()
        service.starts += 1
        self.events.append(Event(time.time(), service.name, "start" if service.starts == 1 else "restart"))

    def watch(self) -> None:
        """Run the restart loop in a thread until `stop`."""
        self._thread = threading.Thread(target=self._loop, name="supervisor", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            with self._lock:
                for service in self.services.values():
                    if service.done or service.process is None or (rc := service.process.poll()) is None:
                        continue
                    self.events.append(Event(time.time(), service.name, f"exit {rc}"))
                    if rc == 0:
                        service.done = True
                    else:
                        self._spawn(service)

    def kill(self, name: str) -> float:
        """SIGKILL a service's whole process group (its sandbox children too); the loop restarts it."""
        process = self.services[name].process
        assert process is not None and process.poll() is None, f"{name} is not running"
        at = time.time()
        os.killpg(process.pid, signal.SIGKILL)
        return at

    def alive(self, name: str) -> bool:
        process = self.services[name].process
        return process is not None and process.poll() is None

    def restarts_between(self, start: float, end: float = float("inf")) -> list[str]:
        """The supervisor's restarts from `start` until `end` (the next fault's injection: not its restarts)."""
        return [f"{e.service} restarted" for e in self.events if start <= e.at < end and e.what == "restart"]

    def log(self, name: str, tail: int = 4000) -> str:
        return (self.logs / f"{name}.log").read_text(errors="replace")[-tail:]

    def stop(self) -> None:
        """End the restart loop, then SIGTERM every service still running (SIGKILL after 30 s)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
        running = [s.process for s in self.services.values() if s.process is not None and s.process.poll() is None]
        for process in running:
            os.killpg(process.pid, signal.SIGTERM)
        for process in running:
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()



def wait_until(predicate: object, seconds: float, what: str, interval_s: float = 0.1) -> float:
    """Poll until `predicate()` is truthy; returns when (time.time()); TimeoutError naming `what` after `seconds`."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            if predicate():  # type: ignore[operator]
                return time.time()
        except Exception:  # noqa: BLE001 - a server that is down right now is what we wait out
            pass
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {seconds:.0f} s waiting for {what}")
        time.sleep(interval_s)


@dataclass
class Servers:
    redis: ThrowawayRedis
    postgres: ThrowawayPostgres

    @classmethod
    def start(cls) -> Servers:
        redis_server = ThrowawayRedis(aof=True)
        redis_server.start()
        postgres = ThrowawayPostgres()
        postgres.start()
        return cls(redis_server, postgres)

    @property
    def database_url(self) -> str:
        return self.postgres.url

    def stop(self) -> None:
        self.redis.stop()
        self.postgres.destroy()


@dataclass
class Stack:
    """The servers, the environment every service shares, and the supervisor that runs them."""

    servers: Servers
    supervisor: Supervisor
    ports: dict[str, int]
    run_id: str
    run_dir: Path
    target: int

    @property
    def env(self) -> dict[str, str]:
        return self.supervisor.env

    def url(self, name: str) -> str:
        return f"http://127.0.0.1:{self.ports[name]}"


def seed_files(seeds: Path, work: Path, rows: int) -> list[str]:
    """The authors' two seed files cut to their first `rows` rows each (importing all ~500 through the executor
    takes minutes on 2 cores and tests nothing more here)."""
    (work / "seeds").mkdir(parents=True, exist_ok=True)
    paths = []
    for name in ("7b_coder_seed_io.jsonl", "7b_coder_code_f_seed_io.jsonl"):
        lines = (seeds / name).read_text().splitlines(keepends=True)[:rows]
        (work / "seeds" / name).write_text("".join(lines))
        paths.append(str(work / "seeds" / name))
    return paths


def build_stack(work: Path, seeds: Path, *, target: int, batch_size: int, token: str, seed_rows: int = 24) -> Stack:
    """Start the servers, migrate the database and start every service but the coordinator (`start_run`)."""
    servers = Servers.start()
    ports = {name: free_port() for name in ("inference", "proposer", "solver")}
    run_id = "faults-" + uuid.uuid4().hex[:8]
    env = {**os.environ, **TINY_RUN, "PWD": str(work), "AZR_PROFILE": "distributed", "AZR_API_TOKEN": token,
           "AZR_DATABASE_URL": servers.database_url, "AZR_REDIS_URL": servers.redis.url, "AZR_RUN_ID": run_id,
           "AZR_RUN_ROOT": str(work / "runs"), "AZR_EXECUTOR_QUEUE": "faults-" + uuid.uuid4().hex[:8],
           "AZR_BATCH_SIZE": str(batch_size),
           "AZR_SGLANG_URLS": json.dumps([f"http://127.0.0.1:{ports['inference']}"]),
           "AZR_PROPOSER_URL": f"http://127.0.0.1:{ports['proposer']}",
           "AZR_SOLVER_URL": f"http://127.0.0.1:{ports['solver']}",
           "AZR_SEED_FILES": json.dumps(seed_files(seeds, work, seed_rows))}
    (work / "logs").mkdir(parents=True, exist_ok=True)
    supervisor = Supervisor(env, work / "logs")
    stack = Stack(servers, supervisor, ports, run_id, work / "runs" / run_id, target)
    try:
        upgrade = subprocess.run([sys.executable, "-m", "azr", "db", "upgrade"], env=env, cwd=work,
                                 capture_output=True, text=True, timeout=180)
        if upgrade.returncode != 0:
            raise RuntimeError(f"azr db upgrade failed: {upgrade.stderr[-2000:]}")
        supervisor.start("worker", "worker", "executor", "--maintenance-interval-s", "1")
        supervisor.start("inference", "serve", "inference", "--port", str(ports["inference"]), "--model", "tiny")
        supervisor.start("proposer", "serve", "proposer", "--port", str(ports["proposer"]))
        supervisor.start("solver", "serve", "solver", "--port", str(ports["solver"]))
        supervisor.watch()
        for name, path in (("inference", "/health"), ("proposer", "/readyz"), ("solver", "/readyz")):
            wait_until(lambda name=name, path=path: answers_ok(stack.url(name) + path), 300, f"{name} ready")
        supervisor.start("trainer", "trainer", "--block-s", "0.5")
    except BaseException:
        supervisor.stop()
        servers.stop()
        raise
    return stack


def start_run(stack: Stack) -> None:
    stack.supervisor.start("coordinator", "coordinator", "--steps", str(stack.target))
