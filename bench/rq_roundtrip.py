"""The cost of the RQ hop: a trivial executor call through RQ (enqueue -> `azr worker executor` -> result) against
the same call on an in-process Executor, measured in the same run; plus the episode queue's publish/read/ack rate,
Redis Stream against in-process.

    .venv/bin/python bench/rq_roundtrip.py [--calls 200] [--redis-url redis://127.0.0.1:6379/0]

Uses a private RQ queue and a private run id on the given Redis, and deletes its keys afterwards.
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))

import redis  # noqa: E402
from rq import Queue, Worker  # noqa: E402

from executor_svc.executor import Executor  # noqa: E402
from executor_svc.rq_client import RQCodeExecutor  # noqa: E402
from services.algorithm.task_types import Role, TaskType  # noqa: E402
from services.ports import EpisodeQueue  # noqa: E402
from services.queues import InProcessEpisodeQueue, RedisEpisodeQueue  # noqa: E402
from services.records import Episode  # noqa: E402

CALLS: dict[str, Callable[[object], object]] = {
    "check_deduction": lambda executor: executor.check_deduction("[1, 2]", "[1,2]"),  # one sandbox run
    "validate_proposal (zero triplet)": lambda executor: executor.validate_proposal("def f(x):\n    return x",
                                                                                   "'Hello World'"),
}


def latencies_ms(call: Callable[[], object], count: int) -> list[float]:
    """Wall time of `count` sequential calls, after 5 warm-up calls."""
    for _ in range(5):
        call()
    samples = []
    for _ in range(count):
        started = time.perf_counter()
        call()
        samples.append((time.perf_counter() - started) * 1000)
    return samples


def summary(samples: list[float]) -> str:
    ordered = sorted(samples)
    p99 = ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))]
    return f"p50 {statistics.median(ordered):7.2f} ms  p99 {p99:7.2f} ms  mean {statistics.fmean(ordered):7.2f} ms"


def start_worker(redis_url: str, queue: str) -> subprocess.Popen[bytes]:
    env = {**os.environ, "AZR_REDIS_URL": redis_url, "AZR_EXECUTOR_BACKEND": "process", "AZR_EXECUTOR_WORKERS": "1"}
    return subprocess.Popen([sys.executable, "-m", "azr", "worker", "executor", "--queue", queue,
                             "--name", f"{queue}-bench"], cwd=REPO_ROOT, env=env, start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def episode_rate(queue: EpisodeQueue, count: int) -> float:
    """Episodes per second through publish (batches of 64), read (64 at a time) and ack."""
    episodes = [Episode(id=str(uuid.uuid4()), run_id="bench", step=0, task_type=TaskType.DEDUCTION, role=Role.SOLVE,
                        prompt_ids=list(range(600)), response_ids=list(range(300)), behaviour_logprobs=[-0.5] * 300,
                        reward=1.0, policy_version=0) for _ in range(count)]
    started = time.perf_counter()
    for start in range(0, count, 64):
        queue.publish(episodes[start:start + 64])
    done = 0
    while done < count:
        batch = queue.read("bench", max_count=64, block_s=0)
        done += queue.ack([delivery.delivery_id for delivery in batch])
    return count / (time.perf_counter() - started)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--episodes", type=int, default=2048)
    parser.add_argument("--redis-url", default=os.environ.get("AZR_REDIS_URL", "redis://127.0.0.1:6379/0"))
    args = parser.parse_args()

    connection = redis.Redis.from_url(args.redis_url)
    queue_name = f"executor-bench-{uuid.uuid4().hex[:8]}"
    run_id = f"bench-{uuid.uuid4().hex[:8]}"
    worker = start_worker(args.redis_url, queue_name)
    try:
        rq_queue = Queue(queue_name, connection=connection)
        deadline = time.monotonic() + 60
        while not Worker.all(connection=connection, queue=rq_queue):
            if time.monotonic() > deadline:
                raise SystemExit("the executor worker did not register within 60 s")
            time.sleep(0.1)
        remote = RQCodeExecutor(connection, queue_name=queue_name, timeout_s=10)
        print(f"{args.calls} sequential calls each; one sandbox worker on each side; Redis {args.redis_url}")
        with Executor(workers=1) as local:
            for name, call in CALLS.items():
                in_process = latencies_ms(lambda call=call: call(local), args.calls)
                through_rq = latencies_ms(lambda call=call: call(remote), args.calls)
                print(f"{name}\n  in-process {summary(in_process)}\n  through RQ {summary(through_rq)}\n"
                      f"  RQ / in-process (p50): {statistics.median(through_rq) / statistics.median(in_process):.1f}x, "
                      f"RQ overhead p50 {statistics.median(through_rq) - statistics.median(in_process):.2f} ms")
        in_memory = episode_rate(InProcessEpisodeQueue(), args.episodes)
        stream = episode_rate(RedisEpisodeQueue(connection, run_id), args.episodes)
        print(f"episode queue, {args.episodes} episodes of 900 tokens (publish 64 / read 64 / ack):\n"
              f"  in-process {in_memory:9.0f} episodes/s\n  Redis Stream {stream:7.0f} episodes/s "
              f"({stream / in_memory:.3f}x in-process)")
    finally:
        os.killpg(worker.pid, signal.SIGTERM)
        worker.wait(timeout=30)
        rq_queue.empty()
        keys = list(connection.scan_iter(match=f"azr:{run_id}:*"))
        if keys:
            connection.delete(*keys)
        connection.close()


if __name__ == "__main__":
    main()
