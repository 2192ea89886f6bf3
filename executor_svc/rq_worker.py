"""The RQ worker class of the executor: no fork per job, and short leases so a dead worker's job is retried soon."""

from __future__ import annotations

from typing import Any

from rq.job import Job
from rq.worker import SimpleWorker

IDLE_HEARTBEAT_S = 20
"""Worker TTL while idle; RQ dequeues in slices of TTL − 15 s, so maintenance (abandoned-job retries) runs that
often."""


class ExecutorWorker(SimpleWorker):
    """Runs executor jobs in the worker process itself, where the sandbox pool lives.

    A plain RQ `Worker` forks a work-horse per job, which would rebuild the pool for every job. Since a
    SimpleWorker cannot heartbeat while a job runs, a job's lease is its hard timeout plus a small margin:
    once a killed worker's lease lapses, any live worker's maintenance retries the job.
    """

    lease_margin_s = 5

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("worker_ttl", IDLE_HEARTBEAT_S)
        super().__init__(*args, **kwargs)

    def get_heartbeat_ttl(self, job: Job, working_time: float = 0.0) -> int:
        if job.timeout is None or job.timeout == -1:
            return super().get_heartbeat_ttl(job, working_time)
        return int(job.timeout) + self.lease_margin_s
