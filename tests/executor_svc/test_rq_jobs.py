"""Executor jobs through real Redis and real `azr worker executor` processes: round trip, and SIGKILL mid-job."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator

import pytest
import redis
from rq import Queue
from rq.job import Job
from throwaway_servers import ExecutorWorkers

from executor_svc.rq_client import RQCodeExecutor
from services.execution import ExecStatus, ExecutorJobFailed

SLOW_PROGRAM = "def f(n):\n    total = 0\n    for i in range(n):\n        total += i % 7\n    return total"
SLOW_N = 8 * 10**6
"""About a second per run: long enough to kill its worker mid-job, well inside the 8 s limit."""


@pytest.fixture()
def private_queue(redis_url: str) -> Iterator[tuple[redis.Redis, str, ExecutorWorkers]]:
    connection = redis.Redis.from_url(redis_url)
    queue = f"executor-test-{uuid.uuid4().hex[:8]}"
    workers = ExecutorWorkers(redis_url, queue)
    try:
        yield connection, queue, workers
    finally:
        workers.stop_all()
        Queue(queue, connection=connection).empty()
        connection.close()


def wait_until_started(job: Job, seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while job.get_status(refresh=True) != "started":
        assert time.monotonic() < deadline, f"job {job.id} never started: {job.get_status()}"
        time.sleep(0.05)


def test_round_trip_through_a_real_worker(private_queue) -> None:
    connection, queue, workers = private_queue
    workers.start("a")
    client = RQCodeExecutor(connection, queue_name=queue, timeout_s=3, wait_s=120)
    ok = client.validate_proposal("def f(a, b):\n    return sorted(a)[::b]", "[3, 1, 2], -1")
    assert (ok.status, ok.output) == (ExecStatus.OK, "[3, 2, 1]")
    forbidden = client.validate_proposal("import random\ndef f(x):\n    return random.random()", "1")
    assert forbidden.status == ExecStatus.FORBIDDEN
    assert client.check_deduction("[3, 2, 1]", "[3,2,1]").correct is True
    assert client.check_abduction("def f(x):\n    return x * 2", "8", "4").correct is True
    induction = client.validate_induction("def f(x):\n    return x + 1", ["1", "2", "3"])
    assert (induction.status, induction.outputs) == (ExecStatus.OK, ["2", "3", "4"])
    assert client.check_induction("def f(x):\n    return x + 1", ["5"], ["6"]).correct is True
    floor = "def f(x):\n    return math.floor(x)"  # the gold program's `import math` travels with the job
    assert client.check_induction(floor, ["2.5"], ["2"]).correct is False
    assert client.check_induction(floor, ["2.5"], ["2"], ["import math"]).correct is True


@pytest.mark.slow
def test_sigkill_mid_job_retries_or_fails_loudly(private_queue) -> None:
    connection, queue, workers = private_queue
    first, second = workers.start("first"), workers.start("second")
    retried = RQCodeExecutor(connection, queue_name=queue, timeout_s=8, retries=2, wait_s=120)
    no_retry = RQCodeExecutor(connection, queue_name=queue, timeout_s=8, retries=0, wait_s=120)
    job_with_retry = retried.enqueue(retried_request := _slow_request(), runs=2)
    job_without_retry = no_retry.enqueue(retried_request, runs=2)
    wait_until_started(job_with_retry)
    wait_until_started(job_without_retry)
    workers.kill(first)
    workers.kill(second)
    workers.start("rescuer")

    from services.execution import ValidationResult

    result = retried.wait(job_with_retry, ValidationResult, deadline_s=120)
    assert (result.status, result.output) == (ExecStatus.OK, repr((SLOW_N // 7) * 21 + sum(range(SLOW_N % 7))))
    with pytest.raises(ExecutorJobFailed, match="Abandoned"):
        no_retry.wait(job_without_retry, ValidationResult, deadline_s=120)


def _slow_request():
    from services.execution import ValidateProposalRequest

    return ValidateProposalRequest(program=SLOW_PROGRAM, input=str(SLOW_N))
