"""`azr worker executor`'s process: an RQ worker serving the pipeline's executor jobs with one long-lived sandbox
pool, and its Prometheus endpoint. Jobs run in this process (a SimpleWorker), so the executor records into this
process's registry."""

from __future__ import annotations

from contextlib import ExitStack

from azr.factory import parts
from azr.factory.process import Process
from executor_svc.rq_worker import ExecutorWorker
from services.settings import Settings


class ExecutorWorkerProcess(Process):
    """The worker, started: `run` serves jobs until stopped (or, with `burst`, until the queue is empty)."""

    def __init__(self, *, worker: ExecutorWorker, closers: ExitStack) -> None:
        super().__init__(closers)
        self.worker = worker

    def run(self, *, burst: bool) -> None:
        try:
            self.worker.work(burst=burst, with_scheduler=False)
        finally:
            self.close()


def open_executor_worker(settings: Settings, *, name: str | None, maintenance_interval_s: int) -> ExecutorWorkerProcess:
    """Build and start the worker on the queue `executor_queue` of the settings' Redis."""
    import redis
    from prometheus_client import CollectorRegistry
    from rq import Queue

    from executor_svc.jobs import install_executor
    from services.http.metrics_endpoint import serve_metrics

    with ExitStack() as closers:
        connection = redis.Redis.from_url(settings.storage.redis_url)
        registry = CollectorRegistry()
        endpoint = serve_metrics(registry, settings.observability.executor_metrics_port,
                                 settings.observability.metrics_address)
        if endpoint is not None:
            closers.callback(endpoint.close)
        executor = parts.local_executor(settings, closers, registry)
        install_executor(executor)
        closers.callback(install_executor, None)
        worker = ExecutorWorker([Queue(settings.executor.executor_queue, connection=connection)],
                                connection=connection, name=name, maintenance_interval=maintenance_interval_s)
        return ExecutorWorkerProcess(worker=worker, closers=closers.pop_all())
