"""`azr trainer`: the distributed profile's trainer process (Redis episode stream -> updates -> checkpoints -> SGLang).

Resumes from the run's latest checkpoint when there is one (weights, optimizer, step, policy version, RNG) and
re-pushes it; SIGTERM/SIGINT stop it at an update boundary with everything checkpointed and acknowledged.

Multi-GPU: started by torchrun (`torchrun --nproc_per_node N -m services trainer ...`), it shards the policy with
FSDP over the N ranks. Rank 0 is the trainer described above; the other ranks only follow it (`rank_follower`) and
ignore SIGTERM/SIGINT, so that the stop happens once, on rank 0, at an update boundary, and releases them.
"""

from __future__ import annotations

import logging
import signal
import threading
from pathlib import Path
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
    from services.metrics_endpoint import serve_metrics
    from services.queues import open_applied_episode_log, open_episode_queue, open_policy_version_board
    from trainer_svc.distributed_env import broadcast_from_main, join_torchrun_job, shutdown
    from trainer_svc.prometheus_metrics import TrainerMetrics
    from trainer_svc.rank_follower import follow_main_rank, release_followers
    from trainer_svc.resume import load_or_restore
    from trainer_svc.service import TrainerService

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    overrides = {"run_id": run_id, "model": model}
    settings = Settings(**{"profile": "distributed", **{k: v for k, v in overrides.items() if v is not None}})
    if settings.queue_backend != "redis":
        typer.echo("azr trainer consumes the Redis episode stream: set AZR_QUEUE_BACKEND=redis "
                   "(the embedded profile trains inside `azr run`)", err=True)
        raise typer.Exit(2)
    ranks = join_torchrun_job(settings.device)  # None unless torchrun started this process
    model_dir = resolve_model(settings.model) if ranks is None or ranks.is_main else Path()
    if ranks is not None:  # rank 0 resolves (a conversion happens once); the others load its directory
        model_dir = Path(broadcast_from_main(str(model_dir), ranks))
    loaded = load_or_restore(settings.run_dir, model_dir, settings, ranks)
    if ranks is not None and not ranks.is_main:
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda *_: None)  # rank 0 stops the job, at an update boundary
        follow_main_rank(loaded, settings, settings.run_dir)
        shutdown()
        return
    engines = []
    if push:
        from services.inference.sglang_client import SGLangClient

        engines.append(SGLangClient(settings.sglang_urls, model_dir))
    board = open_policy_version_board(settings)
    metrics = TrainerMetrics()
    service = TrainerService(loaded=loaded, settings=settings, queue=open_episode_queue(settings),
                             applied_log=open_applied_episode_log(settings), run_dir=settings.run_dir,
                             engines=engines, publish=board.publish, consumer=consumer,
                             read_count=6 * settings.batch_size, metrics=metrics)
    endpoint = serve_metrics(metrics.registry, settings.trainer_metrics_port, settings.metrics_address)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    origin = f"checkpoint {loaded.source}" if loaded.restored else f"base model {loaded.source}"
    layout = f", FSDP over {ranks.world_size} ranks on {ranks.device.type}" if ranks is not None else ""
    typer.echo(f"trainer {consumer}: run {settings.run_id} from {origin}, step {loaded.trainer.step}, "
               f"policy version {loaded.trainer.policy_version}{layout}")
    try:
        reports = service.run(max_updates=max_updates, stop=stop, block_s=block_s)
    finally:
        if endpoint is not None:
            endpoint.close()
    release_followers(loaded)  # not on an exception: torchrun then stops every rank
    shutdown()
    c = service.counters
    typer.echo(f"trainer stopped after {len(reports)} updates: step {loaded.trainer.step}, policy version "
               f"{loaded.trainer.policy_version}, stale {c.stale_dropped}, duplicates {c.duplicates_skipped}, "
               f"rejected {c.rejected}")
