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
    from azr.factory.coordinator import open_coordinator

    settings = cli_settings(config, production=True, **command_line_values(ctx, steps=steps, run_id=run_id))
    settings.save_resolved()
    say = lambda message: typer.echo(message, err=True)  # noqa: E731
    with open_coordinator(settings, say) as coordinator:
        for signum in (signal.SIGINT, signal.SIGTERM):
            signal.signal(signum, lambda *_: coordinator.loop.request_stop())
        coordinator.run()
