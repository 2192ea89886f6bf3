"""`azr trainer`'s process, one per rank: the distributed profile's trainer (Redis episode stream -> updates -> bf16
weights pushed to SGLang every update -> full checkpoints every `checkpoint_every` updates), or, under torchrun, a
rank other than 0 that follows rank 0's updates, exports and checkpoints with its shards (FSDP).

Every rank joins the torchrun job (when there is one), resolves the model (rank 0 resolves, a conversion happens
once, the others load its directory) and loads the policy: from the run's latest full checkpoint when there is one
(weights, optimizer, step, policy version, RNG), else from the base model.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path
from typing import cast

from azr.factory import parts
from azr.factory.process import CannotStart, Process
from services.records.updates import UpdateReport
from services.settings import Settings
from trainer_svc.distributed_env import RankInfo
from trainer_svc.resume import LoadedPolicy
from trainer_svc.service import TrainerService

Say = Callable[[str], None]


class TrainerProcess(Process):
    """Rank 0 (or the only rank), started: `run` trains until stopped, then commits and releases the other ranks."""

    def __init__(self, *, settings: Settings, loaded: LoadedPolicy, ranks: RankInfo | None, service: TrainerService,
                 closers: ExitStack) -> None:
        super().__init__(closers)
        self.settings, self.loaded, self.ranks, self.service = settings, loaded, ranks, service

    def origin(self) -> str:
        """Where the policy came from (a checkpoint or the base model, with LoRA or not), for the start line."""
        loaded, lora = self.loaded, self.settings.trainer.lora
        origin = f"checkpoint {loaded.checkpoint}" if loaded.restored else f"base model {loaded.source}"
        return origin + (f", LoRA r={lora.lora_rank} on {loaded.source}" if lora.lora_rank > 0 else "")

    def layout(self) -> str:
        """How the policy is laid out over ranks (empty in one process), for the start line."""
        if self.ranks is None:
            return ""
        return f", FSDP over {self.ranks.world_size} ranks on {self.ranks.device.type}"

    def run(self, *, max_updates: int | None, stop: threading.Event, block_s: float) -> list[UpdateReport]:
        """Train until `max_updates` updates or `stop`; the updates not yet in a full checkpoint are committed.
        The other ranks are released only after a normal end (on an exception torchrun stops every rank)."""
        from trainer_svc.distributed_env import shutdown
        from trainer_svc.rank_follower import release_followers

        try:
            reports = self.service.run(max_updates=max_updates, stop=stop, block_s=block_s)
        finally:
            self.close()  # the metrics endpoint and the sinks, before the ranks leave
        release_followers(self.loaded)
        shutdown()
        return reports


class FollowerRank(Process):
    """A torchrun rank other than 0, started: `run` mirrors rank 0 until its stop (it never touches the queue, the
    servers or the board)."""

    def __init__(self, *, settings: Settings, loaded: LoadedPolicy, closers: ExitStack) -> None:
        super().__init__(closers)
        self.settings, self.loaded = settings, loaded

    def run(self) -> int:
        """Follow rank 0 until it stops the job; the updates this rank ran."""
        from trainer_svc.distributed_env import shutdown
        from trainer_svc.rank_follower import follow_main_rank

        updates = follow_main_rank(self.loaded, self.settings.trainer, self.settings.run.run_dir,
                                   self.settings.resolved())
        shutdown()
        return updates


def open_trainer(settings: Settings, *, consumer: str, push: bool, say: Say) -> TrainerProcess | FollowerRank:
    """Build and start this rank's trainer process. `push`: keep the SGLang servers (`sglang_urls`) on the current
    weights; `consumer`: this trainer's name in the episode stream's group. CannotStart when the model cannot be
    resolved."""
    from services.compute.torch_threads import configure_torch_threads
    from services.inference.causal_lm import silence_weight_progress_bars
    from trainer_svc.distributed_env import join_torchrun_job
    from trainer_svc.resume import load_or_restore

    configure_torch_threads(settings.run.torch_threads, executor_workers=0)  # the trainer runs no sandbox workers
    ranks = join_torchrun_job(settings.run.device)  # None unless torchrun started this process
    model_dir = resolved_model(settings, ranks)
    silence_weight_progress_bars()  # a bf16 export after every update: no library bar in the trainer's log
    loaded = load_or_restore(settings.run.run_dir, model_dir, settings.trainer, ranks,
                             warmup=parts.warmup_plan(settings))
    if ranks is not None and not ranks.is_main:
        return FollowerRank(settings=settings, loaded=loaded, closers=ExitStack())
    with ExitStack() as closers:
        service = trainer_service(settings, closers, loaded, model_dir, consumer=consumer, push=push, say=say)
        return TrainerProcess(settings=settings, loaded=loaded, ranks=ranks, service=service,
                              closers=closers.pop_all())


def resolved_model(settings: Settings, ranks: RankInfo | None) -> Path:
    """The base model's directory: rank 0 resolves it (a conversion happens once), the other ranks receive it."""
    from services.inference.model_registry import resolve_model
    from services.ports import InferenceError
    from trainer_svc.distributed_env import broadcast_from_main

    try:
        model_dir = resolve_model(settings.inference.model) if ranks is None or ranks.is_main else Path()
    except InferenceError as error:
        raise CannotStart(str(error)) from None
    if ranks is not None:
        model_dir = Path(cast(str, broadcast_from_main(str(model_dir), ranks)))
    return model_dir


def trainer_service(settings: Settings, closers: ExitStack, loaded: LoadedPolicy, model_dir: Path, *, consumer: str,
                    push: bool, say: Say) -> TrainerService:
    """Rank 0's loop over the Redis episode stream, with its Prometheus endpoint and metric sinks."""
    from services.http.metrics_endpoint import serve_metrics
    from services.ports import InferenceEngine
    from trainer_svc.prometheus_metrics import TrainerMetrics

    engines: list[InferenceEngine] = []
    if push:
        from services.inference.sglang_client import SGLangClient

        engines.append(SGLangClient.from_settings(settings.inference, model_dir))
    channels = parts.episode_channels(settings)
    metrics = TrainerMetrics()
    sinks = parts.metric_sinks(settings, closers, say)
    service = TrainerService(loaded=loaded, settings=settings.trainer, rollout=settings.rollout,
                             settings_record=settings.resolved(), queue=channels.queue,
                             applied_log=channels.applied_log, run_dir=settings.run.run_dir, engines=engines,
                             board=channels.board, consumer=consumer, read_count=6 * settings.rollout.batch_size,
                             metrics=metrics, sinks=sinks)
    endpoint = serve_metrics(metrics.registry, settings.observability.trainer_metrics_port,
                             settings.observability.metrics_address)
    if endpoint is not None:
        closers.callback(endpoint.close)
    return service
