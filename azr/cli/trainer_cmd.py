"""`azr trainer`: the distributed profile's trainer process (Redis episode stream -> updates -> bf16 weights pushed to
SGLang every update -> full checkpoints every `checkpoint_every` updates).

Resumes from the run's latest full checkpoint when there is one (weights, optimizer, step, policy version, RNG),
brings the servers and the policy-version board back to it (the episodes of later updates were never acknowledged
and come again); SIGTERM/SIGINT stop it at an update boundary with everything checkpointed and acknowledged.

Multi-GPU: started by torchrun (`torchrun --nproc_per_node N -m azr trainer ...`), it shards the policy with
FSDP over the N ranks. Rank 0 is the trainer described above; the other ranks only follow it (`rank_follower`) and
ignore SIGTERM/SIGINT, so that the stop happens once, on rank 0, at an update boundary, and releases them.
LoRA (`lora_rank` > 0) is one-process only: under torchrun the trainer refuses it before loading anything.

Settings: the distributed profile; flags over AZR_* variables over `--config FILE` over the profile's defaults.
"""

from __future__ import annotations

import logging
import signal
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from azr.cli.exit_codes import bad_input
from azr.cli.settings_options import cli_settings, command_line_values, config_option, setting_option
from services.inference.model_registry import MODEL_HELP

if TYPE_CHECKING:
    from services.settings import Settings


def trainer(
    ctx: typer.Context,
    run_id: Annotated[str | None, setting_option("run_id", "Run name: Redis key prefix and run directory.")] = None,
    model: Annotated[str | None, setting_option("model", f"Base model when the run has no checkpoint yet: "
                                                            f"{MODEL_HELP}.")] = None,
    max_updates: Annotated[int | None, typer.Option(min=1, help="Stop after this many updates.")] = None,
    consumer: Annotated[str, typer.Option(help="Consumer name in the episode stream's group.")] = "trainer",
    push: Annotated[bool, typer.Option(help="Push each update's bf16 weights to the SGLang servers "
                                            "(AZR_SGLANG_URLS) and keep them on the current version.")] = True,
    block_s: Annotated[float, typer.Option(min=0.0, help="Longest wait for episodes per read.")] = 1.0,
    config: Annotated[Path | None, config_option()] = None,
) -> None:
    """Train on episodes from the run's Redis episode stream until stopped (distributed profile)."""
    from azr.factory import episode_channels
    from services.inference.model_registry import resolve_model
    from services.metrics_endpoint import serve_metrics
    from services.ports import InferenceError
    from services.reporting.metric_sinks import open_metric_sinks
    from trainer_svc.distributed_env import broadcast_from_main, join_torchrun_job, shutdown
    from trainer_svc.prometheus_metrics import TrainerMetrics
    from trainer_svc.rank_follower import follow_main_rank, release_followers
    from trainer_svc.resume import load_or_restore
    from trainer_svc.service import TrainerService

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    settings = cli_settings(config, profile="distributed", **command_line_values(ctx, run_id=run_id, model=model))
    if settings.queue_backend != "redis":
        raise bad_input("azr trainer consumes the Redis episode stream: set AZR_QUEUE_BACKEND=redis "
                        "(the embedded profile trains inside `azr run`)")
    _refuse_lora_under_torchrun(settings)  # before any rank loads weights
    from services.torch_threads import configure_torch_threads

    configure_torch_threads(settings.torch_threads, executor_workers=0)  # the trainer runs no sandbox workers
    ranks = join_torchrun_job(settings.device)  # None unless torchrun started this process
    try:
        model_dir = resolve_model(settings.model) if ranks is None or ranks.is_main else Path()
    except InferenceError as error:
        raise bad_input(str(error)) from None
    if ranks is not None:  # rank 0 resolves (a conversion happens once); the others load its directory
        model_dir = Path(broadcast_from_main(str(model_dir), ranks))
    from services.inference.causal_lm import silence_weight_progress_bars

    silence_weight_progress_bars()  # a bf16 export after every update: no library bar in the trainer's log
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

        engines.append(SGLangClient.from_settings(settings, model_dir))
    channels = episode_channels(settings)
    board = channels.board
    metrics = TrainerMetrics()
    sinks = open_metric_sinks(settings, lambda message: typer.echo(message, err=True))
    service = TrainerService(loaded=loaded, settings=settings, queue=channels.queue,
                             applied_log=channels.applied_log, run_dir=settings.run_dir,
                             engines=engines, board=board, consumer=consumer,
                             read_count=6 * settings.batch_size, metrics=metrics, sinks=sinks)
    endpoint = serve_metrics(metrics.registry, settings.trainer_metrics_port, settings.metrics_address)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    origin = f"checkpoint {loaded.checkpoint}" if loaded.restored else f"base model {loaded.source}"
    origin += f", LoRA r={settings.lora_rank} on {loaded.source}" if settings.lora_rank > 0 else ""
    layout = f", FSDP over {ranks.world_size} ranks on {ranks.device.type}" if ranks is not None else ""
    typer.echo(f"trainer {consumer}: run {settings.run_id} from {origin}, step {loaded.trainer.step}, "
               f"policy version {loaded.trainer.policy_version}{layout}")
    try:
        reports = service.run(max_updates=max_updates, stop=stop, block_s=block_s)
    finally:
        if endpoint is not None:
            endpoint.close()
        for sink in sinks:
            sink.close()
    release_followers(loaded)  # not on an exception: torchrun then stops every rank
    shutdown()
    c = service.counters
    typer.echo(f"trainer stopped after {len(reports)} updates: step {loaded.trainer.step}, policy version "
               f"{loaded.trainer.policy_version}, stale {c.stale_dropped}, duplicates {c.duplicates_skipped}, "
               f"rejected {c.rejected}, full checkpoints {c.checkpoints}, server re-pushes "
               f"{service.sync.counters.repushes}")


def _refuse_lora_under_torchrun(settings: Settings) -> None:
    """Exit with a usage error when torchrun started this process and LoRA is on (the FSDP trainer has no LoRA)."""
    from trainer_svc.distributed_env import launched_by_torchrun
    from trainer_svc.lora import refuse_under_fsdp

    if launched_by_torchrun():
        try:
            refuse_under_fsdp(settings)
        except ValueError as error:
            raise bad_input(str(error)) from None
