"""The distributed adapter of the CodeExecutor port: each call is an RQ job on the `executor` queue.

Delivery: a job whose worker dies (SIGKILL, OOM, node loss) is found abandoned by another worker's maintenance and
retried (`Retry(max=...)`); when retries are spent it fails for good. The caller either gets the job's result or a
clear exception (`ExecutorJobFailed`, `ExecutorTimeout`), never silence.

`outages`: the coordinator rides through a short Redis outage (enqueueing and waiting are retried with a log line,
`services.queues.redis_outages`); the APIs keep the default, failing at once, so a request gets its 503 without waiting.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from typing import TypeVar, cast

import redis
from pydantic import BaseModel
from rq import Queue, Retry, Worker
from rq.job import Job
from rq.results import Result

from executor_svc.jobs import EXECUTOR_QUEUE, run_execution_job
from services.execution import (
    CheckAbductionRequest,
    CheckDeductionRequest,
    CheckInductionRequest,
    CheckResult,
    ExecutorJobFailed,
    ExecutorTimeout,
    InductionValidationResult,
    ValidateInductionRequest,
    ValidateProposalRequest,
    ValidationResult,
)
from services.queues.redis_outages import NO_RETRY, RedisOutagePolicy
from services.settings import ExecutorSettings

ResultModel = TypeVar("ResultModel", bound=BaseModel)

FINAL_FAILURES = {Result.Type.FAILED, Result.Type.MAX_RETRIES_EXCEEDED, Result.Type.STOPPED}


def job_timeout_s(timeout_s: float, runs: int) -> int:
    """RQ's hard limit for a job making `runs` sandboxed runs of at most `timeout_s` each, with slack."""
    return int(math.ceil(runs * (timeout_s + 1.0) + 10))


class RQCodeExecutor:
    """CodeExecutor whose calls run on `azr worker executor` processes through Redis."""

    def __init__(
        self,
        connection: redis.Redis,
        *,
        timeout_s: float = 10.0,
        retries: int = 2,
        wait_s: float | None = None,
        queue_name: str = EXECUTOR_QUEUE,
        outages: RedisOutagePolicy = NO_RETRY,
    ) -> None:
        self.connection = connection
        self.queue = Queue(queue_name, connection=connection)
        self.timeout_s = timeout_s
        self.retries = retries
        self.wait_s = wait_s
        self.outages = outages

    @classmethod
    def from_settings(cls, settings: ExecutorSettings, redis_url: str,
                      outages: RedisOutagePolicy = NO_RETRY) -> RQCodeExecutor:
        """Jobs on `settings.executor_queue` of the Redis at `redis_url` (the storage section's), each allowed the
        executor's time limit."""
        return cls(redis.Redis.from_url(redis_url), timeout_s=settings.executor_timeout_s,
                   queue_name=settings.executor_queue, outages=outages)

    # --- the port ----------------------------------------------------------------------------------------------------
    def readiness_problem(self) -> str | None:
        """None when a live `azr worker executor` listens on the queue, else why not."""
        try:
            workers = Worker.all(connection=self.connection, queue=self.queue)
        except redis.RedisError as error:
            return f"executor queue unreachable: {error}"
        return None if workers else f"no live executor worker listens on RQ queue {self.queue.name!r}"

    def validate_proposal(self, program: str, input: str) -> ValidationResult:
        request = ValidateProposalRequest(program=program, input=input)
        return self._call(request, ValidationResult, runs=2)

    def validate_induction(self, program: str, inputs: Sequence[str]) -> InductionValidationResult:
        request = ValidateInductionRequest(program=program, inputs=list(inputs))
        return self._call(request, InductionValidationResult, runs=2 * len(inputs))

    def check_deduction(self, gold_output: str, agent_output: str) -> CheckResult:
        request = CheckDeductionRequest(gold_output=gold_output, agent_output=agent_output)
        return self._call(request, CheckResult, runs=1)

    def check_abduction(self, program: str, gold_output: str, agent_input: str) -> CheckResult:
        request = CheckAbductionRequest(program=program, gold_output=gold_output, agent_input=agent_input)
        return self._call(request, CheckResult, runs=1)

    def check_induction(self, agent_program: str, inputs: Sequence[str], outputs: Sequence[str],
                        gold_imports: Sequence[str] = ()) -> CheckResult:
        request = CheckInductionRequest(agent_program=agent_program, inputs=list(inputs), outputs=list(outputs),
                                        gold_imports=list(gold_imports))
        return self._call(request, CheckResult, runs=len(inputs))

    # --- transport ---------------------------------------------------------------------------------------------------
    def enqueue(self, request: BaseModel, runs: int) -> Job:
        """Put one request on the queue, with retries for abandoned or failed attempts."""
        return self.queue.enqueue(
            run_execution_job,
            request.model_dump(mode="json"),
            job_timeout=job_timeout_s(self.timeout_s, runs),
            retry=Retry(max=self.retries) if self.retries else None,
            result_ttl=600,
            failure_ttl=24 * 3600,
            description=f"executor {getattr(request, 'op', '?')}",
        )

    def wait(self, job: Job, model: type[ResultModel], deadline_s: float) -> ResultModel:
        """Block until the job has a final result; retried attempts are waited through."""
        stream_key = Result.get_key(job.id)
        last_id: bytes | str = "0-0"
        deadline = time.monotonic() + deadline_s
        while True:
            remaining_ms = int((deadline - time.monotonic()) * 1000)
            if remaining_ms <= 0:
                raise ExecutorTimeout(f"executor job {job.id} gave no result within {deadline_s:.0f} s")
            # a synchronous client without decode_responses: [(stream, [(entry id, fields)])], or None on timeout
            response = cast(list[tuple[bytes, list[tuple[bytes, dict[bytes, bytes]]]]] | None,
                            self.connection.xread({stream_key: last_id}, block=min(remaining_ms, 1000)))
            for _stream, entries in response or []:
                for entry_id, payload in entries:
                    last_id = entry_id
                    result = Result.restore(job.id, entry_id.decode(), payload, connection=self.connection)
                    if result.type == Result.Type.SUCCESSFUL:
                        return model.model_validate(result.return_value)
                    if result.type in FINAL_FAILURES:
                        reason = (result.exc_string or "").strip().splitlines()[-1:] or ["no reason recorded"]
                        raise ExecutorJobFailed(f"executor job {job.id} failed: {reason[0]}")
            if not response and job.get_status(refresh=True) == "failed":
                raise ExecutorJobFailed(f"executor job {job.id} failed with no result (see RQ's failed job registry)")

    def _call(self, request: BaseModel, model: type[ResultModel], runs: int) -> ResultModel:
        op = getattr(request, "op", "job")
        job = self.outages.call(f"enqueueing an executor {op}", lambda: self.enqueue(request, runs))
        per_attempt = job_timeout_s(self.timeout_s, runs)
        deadline = self.wait_s if self.wait_s is not None else per_attempt * (self.retries + 1) + 30
        return self.outages.call(f"waiting for executor job {job.id}", lambda: self.wait(job, model, deadline))
