"""Prometheus metrics of the sandboxed executor: tasks by kind and status, and their latency.

Recorded by the `Executor` itself (executor_svc/executor.py), so the same numbers come from every place one runs:
the embedded profile's in-process pool, the coordinator's in-process pool, and `azr worker executor`. The RQ worker
is a `SimpleWorker` (executor_svc/rq_worker.py): jobs run in the worker process, where the registry lives, so no
multiprocess collection is needed.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Histogram

TASK_SECONDS_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 40.0)
"""From a static-check rejection (sub-millisecond) to two full 10 s runs of a validation plus start-up."""

TASK_KINDS = ("validate_proposal", "validate_induction", "check_deduction", "check_abduction", "check_induction")
"""The `kind` label values: the executor's five operations."""


class ExecutorMetrics:
    """`azr_executor_tasks_total{kind,status}` and `azr_executor_task_duration_seconds{kind}` in `registry`."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        self.tasks = Counter("azr_executor_tasks", "Executor tasks (validations and answer checks) by kind and "
                             "verdict status", ["kind", "status"], registry=self.registry)
        self.duration = Histogram("azr_executor_task_duration_seconds", "Wall time of one executor task, static "
                                  "check and sandbox runs included", ["kind"], buckets=TASK_SECONDS_BUCKETS,
                                  registry=self.registry)
        for kind in TASK_KINDS:  # every kind's series exists from the start, so rate() sees the first task
            self.duration.labels(kind)

    def observe(self, kind: str, status: str, seconds: float) -> None:
        """Count one finished task of `kind` with verdict `status` that took `seconds`."""
        self.tasks.labels(kind, status).inc()
        self.duration.labels(kind).observe(seconds)
