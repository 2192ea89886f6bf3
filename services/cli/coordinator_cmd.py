"""`azr coordinator`: Algorithm 1 in the distributed profile.

Rollouts go through the proposer and solver APIs, executor work through RQ, episodes to the Redis stream, and the
policy version comes from the trainer's board. SIGINT/SIGTERM stop it at the next step boundary.
"""

from __future__ import annotations

import signal
from typing import Annotated, Any, Optional

import typer
from prometheus_client import CollectorRegistry

from services.settings import Settings


def open_code_executor(settings: Settings, metrics_registry: CollectorRegistry | None = None) -> Any:
    """RQ jobs on `executor` workers when the queues are Redis, else an in-process sandbox pool (whose task counts
    and latencies go into `metrics_registry` when given; RQ workers serve their own)."""
    if settings.queue_backend == "redis":
        from executor_svc.rq_client import RQCodeExecutor

        return RQCodeExecutor.from_settings(settings)
    from executor_svc.executor import Executor
    from executor_svc.prometheus_metrics import ExecutorMetrics

    metrics = ExecutorMetrics(metrics_registry) if metrics_registry is not None else None
    return Executor.from_settings(settings, metrics=metrics)


def coordinator(
    steps: Annotated[Optional[int], typer.Option(help="Steps to run (default: AZR_STEPS).")] = None,
    run_id: Annotated[Optional[str], typer.Option(help="Run name (default: AZR_RUN_ID).")] = None,
) -> None:
    """Run self-play steps against the proposer/solver APIs, RQ executor workers and the trainer."""
    from executor_svc.rq_client import RQCodeExecutor
    from services.coordinator.http_rollouts import HttpRollouts
    from services.coordinator.loop import LoopOptions, SelfPlayLoop
    from services.coordinator.prometheus_metrics import CoordinatorMetrics
    from services.coordinator.step import SelfPlayStep, StepConfig
    from services.coordinator.step_metrics import MetricsLog
    from services.evaluation.periodic import PeriodicEvaluation
    from services.metrics_endpoint import serve_metrics
    from services.queues import open_episode_queue, open_policy_version_board
    from services.store import open_store

    overrides = {"steps": steps, "run_id": run_id}
    settings = Settings(**{k: v for k, v in overrides.items() if v is not None})
    settings.require_production_secrets()
    settings.save_resolved()
    store = open_store(settings.database_url, buffer_cap=settings.buffer_cap)
    store.ensure_run(settings.run_id, settings.resolved())
    prometheus = CoordinatorMetrics()
    executor = open_code_executor(settings, prometheus.registry)
    episodes = open_episode_queue(settings)
    prometheus.watch_episode_queue(episodes)
    if isinstance(executor, RQCodeExecutor):
        prometheus.watch_executor_queue(lambda: executor.queue.count)
    endpoint = serve_metrics(prometheus.registry, settings.coordinator_metrics_port, settings.metrics_address)
    rollouts = HttpRollouts(settings.proposer_url, settings.solver_url, settings.api_token.get_secret_value())
    runner = SelfPlayStep(run_id=settings.run_id, store=store, executor=executor, rollouts=rollouts,
                          episodes=episodes, config=StepConfig.from_settings(settings),
                          executor_parallelism=settings.coordinator_executor_parallelism)
    options = LoopOptions(steps=settings.steps, seed=settings.seed,
                          seed_target=settings.batch_size * settings.seed_multiplier,
                          seed_max_rounds=settings.seed_max_rounds, max_staleness=settings.max_staleness)
    loop = SelfPlayLoop(run_id=settings.run_id, step_runner=runner, store=store,
                        metrics=MetricsLog(settings.run_dir / "metrics.jsonl"), options=options,
                        versions=open_policy_version_board(settings), progress=lambda m: typer.echo(m, err=True),
                        on_step=prometheus.observe_step,
                        evaluation=PeriodicEvaluation.from_settings(settings, rollouts, executor,
                                                                    progress=lambda m: typer.echo(m, err=True)))
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: loop.request_stop())
    try:
        if loop.last_step() == 0:
            import_seed_files(settings, store, executor)
        loop.run(policy_version=loop.versions.current() if loop.versions else 0)
    finally:
        runner.close()
        rollouts.close()
        close = getattr(executor, "close", None)
        if callable(close):
            close()
        store.close()
        if endpoint is not None:
            endpoint.close()


def import_seed_files(settings: Settings, store: Any, executor: Any) -> None:
    """Import `settings.seed_files` into the buffers (validated by the executor) before any model seeding."""
    from services.store.seed_import import import_seeds

    for path in settings.seed_files:
        summary = import_seeds(path, executor, store)
        typer.echo(f"imported seeds from {path}: stored {summary.stored}, duplicate {summary.duplicate}, "
                   f"rejected {summary.rejected}", err=True)
