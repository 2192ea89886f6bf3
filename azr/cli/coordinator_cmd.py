"""`azr coordinator`: Algorithm 1 in the distributed profile.

Rollouts go through the proposer and solver APIs, executor work through RQ, episodes to the Redis stream, and the
policy version comes from the trainer's board. SIGINT/SIGTERM stop it at the next step boundary. `--steps N` is the
run's target, a total: a restarted coordinator reads the last step the run recorded and runs up to step N (never N
more), so a supervisor that restarts it (compose's `restart: on-failure`) ends the run at N. Settings: flags over
AZR_* variables over `--config FILE` over the profile's defaults; metrics go to `<run_dir>/metrics.jsonl` and, as the
settings ask, to TensorBoard and W&B.
"""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Annotated

import typer

from azr.cli.settings_options import cli_settings, command_line_values, config_option, setting_option


def coordinator(
    ctx: typer.Context,
    steps: Annotated[int | None, setting_option(
        "steps", "Run up to this step, a total: a restarted coordinator runs the steps after the last one the run "
                 "recorded up to N, not N more.", min=0)] = None,
    run_id: Annotated[str | None, setting_option("run_id", "Run name: Redis key prefix and run directory.")] = None,
    config: Annotated[Path | None, config_option()] = None,
) -> None:
    """Run self-play steps against the proposer/solver APIs, RQ executor workers and the trainer."""
    from azr import factory
    from services.coordinator.prometheus_metrics import CoordinatorMetrics
    from services.coordinator.step_metrics import MetricsLog
    from services.http.metrics_endpoint import serve_metrics
    from services.reporting.metric_sinks import open_metric_sinks

    settings = cli_settings(config, production=True, **command_line_values(ctx, steps=steps, run_id=run_id))
    settings.save_resolved()
    store = factory.run_store(settings)
    prometheus = CoordinatorMetrics()
    executor = factory.code_executor(settings, prometheus.registry, ride_through_redis_outages=True)
    channels = factory.episode_channels(settings)
    prometheus.watch_episode_queue(channels.queue)
    depth = factory.executor_queue_depth(executor)
    if depth is not None:
        prometheus.watch_executor_queue(depth)
    endpoint = serve_metrics(prometheus.registry, settings.coordinator_metrics_port, settings.metrics_address)
    rollouts = factory.rollouts(settings)  # no local engine: HTTP to the proposer and solver APIs
    say = lambda message: typer.echo(message, err=True)  # noqa: E731
    metrics = MetricsLog(settings.run_dir / "metrics.jsonl", sinks=open_metric_sinks(settings, say))
    built = factory.self_play(settings, store=store, executor=executor, rollouts=rollouts, episodes=channels.queue,
                              metrics=metrics, say=say, versions=channels.board, on_step=prometheus.observe_step,
                              steps_are_total=True)
    loop = built.loop
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: loop.request_stop())
    try:
        if loop.last_step() == 0:
            factory.import_seed_files(settings, store, executor, say)
        loop.run(policy_version=loop.versions.current() if loop.versions else 0)
    finally:
        metrics.close()
        built.step_runner.close()
        for closable in (rollouts, executor):
            close = getattr(closable, "close", None)
            if callable(close):
                close()
        store.close()
        if endpoint is not None:
            endpoint.close()
