"""`azr trainer`: the distributed profile's trainer process (Redis episode stream -> updates -> checkpoints -> SGLang).

Resumes from the run's latest checkpoint when there is one (weights, optimizer, step, policy version, RNG) and
re-pushes it; SIGTERM/SIGINT stop it at an update boundary with everything checkpointed and acknowledged.
"""

from __future__ import annotations

import logging
import signal
import threading
from typing import Annotated, Optional

import typer

from services.settings import Settings


def trainer(
    run_id: Annotated[Optional[str], typer.Option(help="Run name: Redis key prefix and run directory.")] = None,
    model: Annotated[Optional[str], typer.Option(help="Base model (when the run has no checkpoint yet).")] = None,
    max_updates: Annotated[Optional[int], typer.Option(min=1, help="Stop after this many updates.")] = None,
    consumer: Annotated[str, typer.Option(help="Consumer name in the episode stream's group.")] = "trainer",
    push: Annotated[bool, typer.Option(help="Push checkpoints to the SGLang servers (AZR_SGLANG_URLS).")] = True,
    block_s: Annotated[float, typer.Option(min=0.0, help="Longest wait for episodes per read.")] = 1.0,
) -> None:
    """Train on episodes from the run's Redis episode stream until stopped (distributed profile)."""
    from services.inference.model_registry import resolve_model
    from services.queues import open_applied_episode_log, open_episode_queue, open_policy_version_board
    from trainer_svc.resume import load_or_restore
    from trainer_svc.service import TrainerService

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    overrides = {"run_id": run_id, "model": model}
    settings = Settings(**{"profile": "distributed", **{k: v for k, v in overrides.items() if v is not None}})
    if settings.queue_backend != "redis":
        typer.echo("azr trainer consumes the Redis episode stream: set AZR_QUEUE_BACKEND=redis "
                   "(the embedded profile trains inside `azr run`)", err=True)
        raise typer.Exit(2)
    model_dir = resolve_model(settings.model)
    loaded = load_or_restore(settings.run_dir, model_dir, settings)
    engines = []
    if push:
        from services.inference.sglang_client import SGLangClient

        engines.append(SGLangClient(settings.sglang_urls, model_dir))
    board = open_policy_version_board(settings)
    service = TrainerService(loaded=loaded, settings=settings, queue=open_episode_queue(settings),
                             applied_log=open_applied_episode_log(settings), run_dir=settings.run_dir,
                             engines=engines, publish=board.publish, consumer=consumer,
                             read_count=6 * settings.batch_size)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    origin = f"checkpoint {loaded.source}" if loaded.restored else f"base model {loaded.source}"
    typer.echo(f"trainer {consumer}: run {settings.run_id} from {origin}, step {loaded.trainer.step}, "
               f"policy version {loaded.trainer.policy_version}")
    reports = service.run(max_updates=max_updates, stop=stop, block_s=block_s)
    c = service.counters
    typer.echo(f"trainer stopped after {len(reports)} updates: step {loaded.trainer.step}, policy version "
               f"{loaded.trainer.policy_version}, stale {c.stale_dropped}, duplicates {c.duplicates_skipped}, "
               f"rejected {c.rejected}")
