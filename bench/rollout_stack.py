"""The distributed profile on loopback for bench/rollout.py: every service a real process, torn down afterwards.

Started as tests/services/coordinator/test_distributed_e2e.py starts them: a private PostgreSQL database (created
here, dropped at the end), Redis under a private run id and RQ queue (their keys deleted at the end), RQ executor
workers (`azr worker executor`), `azr serve inference`, `azr serve proposer`, `azr serve solver`, `azr trainer` and
`azr coordinator`. The coordinator's progress lines are read from its pipe and timestamped as they arrive; a
monitor thread polls Redis for the moment each step's episodes are in the stream and each policy version is
published, so the trainer's latency is measured where the coordinator sees it.
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
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import httpx
import redis

from bench.rollout_table import ProgressClock, TrainerUpdate
from services.store.private_database import PrivateDatabase

REPO_ROOT = Path(__file__).resolve().parent.parent
KEPT_ENVIRONMENT = ("AZR_MODEL_CACHE", "AZR_SHARED_DIR")
"""AZR_ variables passed on to the services; every other one is dropped so the stack is what this script says."""


@dataclass
class StackOptions:
    """What the stack runs: sizes of the step and how many executor worker processes."""

    model: str
    steps: int
    batch_size: int
    max_response_tokens: int
    learnability_samples: int
    max_staleness: int
    micro_batch_size: int
    executor_processes: int
    torch_threads: int  # OMP_NUM_THREADS of every service; 0 leaves torch's default
    seed_files: Sequence[Path]
    redis_url: str
    postgres_url: str
    timeout_s: float


@dataclass
class StackResult:
    """What the run left: the coordinator's metrics lines and progress clock, the trainer's updates."""

    lines: list[dict[str, Any]]
    clock: ProgressClock
    updates: list[TrainerUpdate]
    startup_s: float  # services started and ready
    seeding_s: float  # coordinator start -> step 1 begins (seed files imported through RQ)


class RedisMonitor(threading.Thread):
    """Polls the run's episode stream and policy version every 20 ms; records when each changed (wall clock)."""

    def __init__(self, redis_url: str, run_id: str) -> None:
        super().__init__(name="bench-redis-monitor", daemon=True)
        from services.queues.keys import episode_stream_key, policy_version_key

        self.client = redis.Redis.from_url(redis_url)
        self.stream, self.version_key = episode_stream_key(run_id), policy_version_key(run_id)
        self.added_at: list[tuple[int, float]] = []  # (entries added so far, time of the last entry)
        self.version_at: dict[int, float] = {}
        self.halt = threading.Event()

    def run(self) -> None:
        while not self.halt.is_set():
            self.poll()
            self.halt.wait(0.02)
        self.client.close()

    def poll(self) -> None:
        """One look at the stream and the version key."""
        try:
            info = self.client.xinfo_stream(self.stream)
            added = int(info.get("entries-added", 0))
            if added and (not self.added_at or added > self.added_at[-1][0]):
                last_id = info["last-generated-id"]
                last_id = last_id.decode() if isinstance(last_id, bytes) else str(last_id)
                self.added_at.append((added, int(last_id.split("-")[0]) / 1000))  # the entry id is its ms time
        except redis.ResponseError:  # the stream does not exist before the trainer creates its group
            pass
        value = self.client.get(self.version_key)
        version = int(value) if value is not None else 0
        for reached in range(1, version + 1):
            self.version_at.setdefault(reached, time.time())

    def published_at(self, entries: int) -> float | None:
        """When the stream first held `entries` entries in all."""
        return next((at for added, at in self.added_at if added >= entries), None)


class Services:
    """The stack's subprocesses, each in its own session; stopped together (SIGTERM, then SIGKILL)."""

    def __init__(self, env: dict[str, str], logs: Path) -> None:
        self.env, self.logs = env, logs
        self.processes: dict[str, subprocess.Popen[bytes]] = {}
        self.log_files: list[IO[bytes]] = []

    def start(self, name: str, *args: str, stdout: Any = None) -> subprocess.Popen[bytes]:
        """`python -m azr <args>`; output to logs/<name>.log unless `stdout` is given."""
        target = stdout
        if target is None:
            target = open(self.logs / f"{name}.log", "wb")
            self.log_files.append(target)
        process = subprocess.Popen([sys.executable, "-m", "azr", *args], env=self.env, cwd=REPO_ROOT,
                                   stdout=target, stderr=subprocess.STDOUT, start_new_session=True)
        self.processes[name] = process
        return process

    def tail(self, name: str, chars: int = 3000) -> str:
        path = self.logs / f"{name}.log"
        return path.read_text(errors="replace")[-chars:] if path.exists() else ""

    def stop(self) -> None:
        """Terminate every process group still running; kill what has not exited after 30 s."""
        for process in self.processes.values():
            if process.poll() is None:
                _signal_group(process, signal.SIGTERM)
        for process in self.processes.values():
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                _signal_group(process, signal.SIGKILL)
                process.wait()
        for log in self.log_files:
            log.close()


def _signal_group(process: subprocess.Popen[bytes], signum: int) -> None:
    """Signal the process's session (it and its children, e.g. sandbox workers); it may have just exited."""
    try:
        os.killpg(process.pid, signum)
    except ProcessLookupError:
        pass


def _answers(url: str) -> bool:
    try:
        return httpx.get(url, timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


def _wait_ready(url: str, process: subprocess.Popen[bytes], seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while not _answers(url):
        if process.poll() is not None:
            raise RuntimeError(f"{what} exited with {process.returncode} before it was ready")
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what} not ready after {seconds:.0f} s")
        time.sleep(0.1)


def _free_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _pump(stream: IO[bytes], log: IO[bytes], clock: ProgressClock) -> None:
    """Copy the coordinator's output to its log, timestamping each line as it arrives."""
    for raw in iter(stream.readline, b""):
        clock.observe(time.perf_counter(), raw.decode(errors="replace").rstrip("\n"))
        log.write(raw)
        log.flush()


def _environment(options: StackOptions, root: Path, database_url: str, run_id: str, queue: str,
                 ports: dict[str, int]) -> dict[str, str]:
    inherited = {k: v for k, v in os.environ.items() if not k.startswith("AZR_") or k in KEPT_ENVIRONMENT}
    if options.torch_threads:
        inherited["OMP_NUM_THREADS"] = str(options.torch_threads)
    return {**inherited, "PYTHONUNBUFFERED": "1",
            "AZR_PROFILE": "distributed", "AZR_API_TOKEN": "bench-" + uuid.uuid4().hex,
            "AZR_DATABASE_URL": database_url, "AZR_REDIS_URL": options.redis_url, "AZR_RUN_ID": run_id,
            "AZR_RUN_ROOT": str(root / "runs"), "AZR_EXECUTOR_QUEUE": queue, "AZR_EXECUTOR_BACKEND": "process",
            "AZR_EXECUTOR_WORKERS": "1", "AZR_MODEL": options.model, "AZR_BATCH_SIZE": str(options.batch_size),
            "AZR_MAX_RESPONSE_TOKENS": str(options.max_response_tokens),
            "AZR_LEARNABILITY_SAMPLES": str(options.learnability_samples), "AZR_SEED_MAX_ROUNDS": "0",
            "AZR_MAX_STALENESS": str(options.max_staleness), "AZR_MICRO_BATCH_SIZE": str(options.micro_batch_size),
            "AZR_SGLANG_URLS": json.dumps([f"http://127.0.0.1:{ports['inference']}"]),
            "AZR_PROPOSER_URL": f"http://127.0.0.1:{ports['proposer']}",
            "AZR_SOLVER_URL": f"http://127.0.0.1:{ports['solver']}",
            "AZR_SEED_FILES": json.dumps([str(path) for path in options.seed_files])}


def _trainer_updates(run_dir: Path, monitor: RedisMonitor, episodes_per_step: int) -> list[TrainerUpdate]:
    path = run_dir / "trainer_metrics.jsonl"
    reports = [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []
    updates = []
    for index, report in enumerate(reports, start=1):
        updates.append(TrainerUpdate(
            update=index, episodes=int(report["episodes"]), tokens=int(report["tokens"]),
            update_s=float(report["step_time_s"]),
            batch_published_at=monitor.published_at(index * episodes_per_step),
            version_published_at=monitor.version_at.get(index), previous_version_at=monitor.version_at.get(index - 1)))
    return updates


def _delete_keys(redis_url: str, run_id: str, queue: str) -> None:
    """The run's `azr:{run_id}:*` keys and the private RQ queue's keys (job hashes expire on their own TTL)."""
    client = redis.Redis.from_url(redis_url)
    try:
        for pattern in (f"azr:{run_id}:*", f"rq:*{queue}*"):
            for key in client.scan_iter(match=pattern, count=500):
                client.delete(key)
        client.srem("rq:queues", f"rq:queue:{queue}")
    finally:
        client.close()


def run_stack(options: StackOptions, root: Path) -> StackResult:
    """Start the stack, run `options.steps` coordinator steps and as many trainer updates, tear everything down."""
    run_id, queue = "bench-" + uuid.uuid4().hex[:8], "bench-executor-" + uuid.uuid4().hex[:8]
    ports = {name: _free_port() for name in ("inference", "proposer", "solver")}
    logs = root / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    clock = ProgressClock()
    monitor = RedisMonitor(options.redis_url, run_id)
    with PrivateDatabase(options.postgres_url, prefix="azr_bench") as database_url:
        env = _environment(options, root, database_url, run_id, queue, ports)
        services = Services(env, logs)
        try:
            began = time.perf_counter()
            migrated = subprocess.run([sys.executable, "-m", "azr", "db", "upgrade"], env=env, cwd=REPO_ROOT,
                                      capture_output=True, text=True, timeout=300)
            if migrated.returncode != 0:
                raise RuntimeError(f"azr db upgrade failed: {migrated.stderr[-2000:]}")
            for index in range(options.executor_processes):
                services.start(f"worker{index}", "worker", "executor")
            inference = services.start("inference", "serve", "inference", "--port", str(ports["inference"]),
                                       "--model", options.model)
            _wait_ready(f"http://127.0.0.1:{ports['inference']}/health", inference, 600, "azr serve inference")
            for name in ("proposer", "solver"):
                services.start(name, "serve", name, "--port", str(ports[name]))
            for name in ("proposer", "solver"):
                _wait_ready(f"http://127.0.0.1:{ports[name]}/readyz", services.processes[name], 300, f"{name} API")
            trainer = services.start("trainer", "trainer", "--max-updates", str(options.steps), "--block-s", "0.5")
            monitor.start()
            startup_s = time.perf_counter() - began
            with open(logs / "coordinator.log", "wb") as log:
                coordinator_began = time.perf_counter()
                coordinator = services.start("coordinator", "coordinator", "--steps", str(options.steps),
                                             stdout=subprocess.PIPE)
                assert coordinator.stdout is not None
                pump = threading.Thread(target=_pump, args=(coordinator.stdout, log, clock), daemon=True)
                pump.start()
                if coordinator.wait(timeout=options.timeout_s) != 0:
                    raise RuntimeError(f"azr coordinator exited with {coordinator.returncode}")
                pump.join(timeout=10)
            if trainer.wait(timeout=options.timeout_s) != 0:
                raise RuntimeError(f"azr trainer exited with {trainer.returncode}")
            monitor.poll()  # the last version, even if the thread's next look has not come yet
            run_dir = root / "runs" / run_id
            lines = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines() if line]
            updates = _trainer_updates(run_dir, monitor, 6 * options.batch_size)
            seeding_s = clock.starts.get(1, coordinator_began) - coordinator_began
            return StackResult(lines=lines, clock=clock, updates=updates, startup_s=startup_s, seeding_s=seeding_s)
        except BaseException:
            for name in services.processes:
                print(f"----- {name} (last lines) -----\n{services.tail(name)}", file=sys.stderr)
            raise
        finally:
            monitor.halt.set()
            services.stop()
            if monitor.is_alive():
                monitor.join(timeout=5)
            _delete_keys(options.redis_url, run_id, queue)
