"""`azr run`'s process, the embedded profile in one process: SQLite buffers, in-process queue, process sandbox,
local engine, trainer, and the run's own API.

`open_embedded_run` wires the same pieces the distributed profile runs as services, so `azr run` exercises the real
code path: episodes go through the in-process EpisodeQueue and the trainer runs the distributed trainer's update
cycle on them (azr/embedded_trainer.py: bf16 weights pushed to the engine after every update, the full checkpoint
every `checkpoint_every` updates, acknowledged only after it is durable). A resumed run first makes again the updates
that were pushed but not in the last full checkpoint, from the episodes the store kept.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path

from azr.embedded_trainer import InProcessTrainer, replay_uncommitted_steps
from azr.factory import parts
from azr.factory.process import Process
from azr.run_api import RunApi, start_run_api
from executor_svc.executor import Executor
from services.compute.torch_threads import SharedCoreThreads, threads_beside_executor
from services.coordinator.loop import SelfPlayLoop
from services.coordinator.prometheus_metrics import CoordinatorMetrics
from services.inference.decoding import DecodeProgress
from services.inference.engine_choice import InProcessEngine
from services.inference.generation_hooks import GenerationHooks
from services.json_types import JsonObject
from services.settings import Settings
from services.store import SqlTripletStore
from trainer_svc.ppo_update import MicroBatchProgress
from trainer_svc.resume import LoadedPolicy

Say = Callable[[str], None]


class EmbeddedRun(Process):
    """Everything `azr run` runs, started; `run()` seeds (first time) and runs the steps, `close()` stops it all."""

    def __init__(self, *, settings: Settings, say: Say, store: SqlTripletStore, executor: Executor,
                 engine: InProcessEngine, loaded: LoadedPolicy, trainer: InProcessTrainer, loop: SelfPlayLoop,
                 api: RunApi | None, closers: ExitStack) -> None:
        super().__init__(closers)
        self.settings, self.say = settings, say
        self.store, self.executor, self.engine, self.loaded = store, executor, engine, loaded
        self.trainer, self.loop, self.api = trainer, loop, api

    def run(self) -> list[JsonObject]:
        """Import the seed files (a new run), run the steps, then write the full checkpoint of what is uncommitted;
        the steps' metrics lines."""
        if self.loop.last_step() == 0:
            parts.import_seed_files(self.settings, self.store, self.executor, self.say)
        lines = self.loop.run(policy_version=int(self.loaded.trainer.policy_version))
        checkpoint = self.trainer.finish()  # a normal end or a Ctrl-C at a step boundary: nothing left uncommitted
        if checkpoint is not None:
            self.say(f"full checkpoint {checkpoint} written")
        return lines


def open_embedded_run(settings: Settings, say: Say, *,
                      on_decode_step: Callable[[DecodeProgress], None] | None = None) -> EmbeddedRun:
    """Build and start `azr run`'s process: store, executor, policy (restored when the run has a checkpoint),
    engine, in-process trainer (the updates the restored checkpoint lacks made again), the loop and the run's API.
    `say` hears every progress line; `on_decode_step` every decoding step of the engine (a live bar)."""
    from services.inference.causal_lm import silence_weight_progress_bars
    from services.inference.engine_choice import build_local_engine
    from services.inference.model_registry import resolve_model

    silence_weight_progress_bars()  # a load or save after every update: no library bar in the run's terminal
    with ExitStack() as closers:
        prometheus = CoordinatorMetrics()  # the steps' and the executor's metrics, on the run API's /metrics
        store = parts.run_store(settings, closers, create=True)
        executor = parts.local_executor(settings, closers, prometheus.registry)
        say(f"executor ready: {settings.executor.executor_workers} workers, isolation {executor.isolation}")
        threads = torch_threads(settings, executor, say)
        model_dir = resolve_model(settings.inference.model, say=say)
        loaded = load_policy(settings, Path(model_dir), say)
        hooks = GenerationHooks(on_decode_step=on_decode_step,
                                before_forward=threads.before_generation_forward if threads is not None else None,
                                generation_threads=threads.generation_threads if threads is not None else None)
        engine = build_local_engine(loaded.source, settings.inference, settings.run, say=say, hooks=hooks)
        closers.callback(engine.close)
        say_loaded(settings, loaded, engine, say)
        channels = parts.episode_channels(settings)  # shared by the loop and the in-process trainer
        prometheus.watch_episode_queue(channels.queue)
        trainer = InProcessTrainer(loaded=loaded, settings=settings.trainer, rollout=settings.rollout,
                                   settings_record=settings.resolved(), run_dir=settings.run.run_dir,
                                   queue=channels.queue, applied_log=channels.applied_log, engines=[engine],
                                   board=channels.board,
                                   before_update=threads.for_update if threads is not None else None)
        trainer.start()  # the engine serves the trainer's bf16 weights, the board its version
        replay_uncommitted_steps(store, settings.run.run_id, trainer, channels.queue, say)
        built = parts.self_play(settings, closers, store=store, executor=executor,
                                rollouts=parts.rollouts(settings, closers, engine), episodes=channels.queue,
                                say=say, updater=trainer, on_step=prometheus.observe_step,
                                continues_after_step=loaded.snapshot_run_step)
        api = start_run_api(settings, store, executor, prometheus.registry, say)
        if api is not None:
            closers.callback(api.close)
        return EmbeddedRun(settings=settings, say=say, store=store, executor=executor, engine=engine, loaded=loaded,
                           trainer=trainer, loop=built.loop, api=api, closers=closers.pop_all())


def torch_threads(settings: Settings, executor: Executor, say: Say) -> SharedCoreThreads | None:
    """AZR_TORCH_THREADS=N fixes the count; 0 (the default) shares the cores with the sandbox workers."""
    threads = threads_beside_executor(settings.run.torch_threads, settings.executor.executor_workers,
                                      executor.jobs_running)
    if threads is None:
        say(f"torch uses {settings.run.torch_threads} CPU thread(s) (AZR_TORCH_THREADS)")
    else:
        say(f"torch uses {threads.idle_threads} CPU thread(s), {threads.busy_threads} while sandbox jobs "
            f"run (AZR_TORCH_THREADS=0; N fixes it)")
    return threads


def load_policy(settings: Settings, model_dir: Path, say: Say) -> LoadedPolicy:
    """The trainer's policy: the run's latest checkpoint, else the base model (after the format warm-up, when the
    settings ask for it); a line per micro-batch of each update."""
    from trainer_svc.resume import load_or_restore

    return load_or_restore(settings.run.run_dir, model_dir, settings.trainer, on_micro_batch=update_progress_line(say),
                           warmup=parts.warmup_plan(settings), say=say)


def say_loaded(settings: Settings, loaded: LoadedPolicy, engine: InProcessEngine, say: Say) -> None:
    """Where the policy came from: a checkpoint (its version and step) or the base model (and the engine's dtype)."""
    version = int(loaded.trainer.policy_version)
    snapshot = settings.trainer.lora.lora_init_adapter
    if snapshot is not None and loaded.checkpoint is None:
        say(f"started from the snapshot {snapshot} (run step {loaded.snapshot_run_step}, policy version {version}, "
            f"trainer step {loaded.trainer.step}): AdamW moments restart from zero at step "
            f"{loaded.snapshot_run_step + 1}, buffers from the seed files")
    elif version:
        say(f"resumed from {loaded.checkpoint or loaded.source} (policy version {version}, "
            f"trainer step {loaded.trainer.step})")
    else:
        say(f"model {settings.inference.model} loaded from {loaded.source}; generating in "
            f"{engine.model_info()['dtype']} (AZR_LOCAL_ENGINE, AZR_LLAMA_CPP_BASE)")


def embedded_database_url(settings: Settings) -> str:
    """The run's own SQLite file unless AZR_DATABASE_URL names another database."""
    if os.environ.get("AZR_DATABASE_URL"):
        return settings.storage.database_url
    return f"sqlite:///{(settings.run.run_dir / 'buffers.sqlite3').resolve()}"


def update_progress_line(say: Say) -> Callable[[MicroBatchProgress], None]:
    """A line per micro-batch of an update: on CPU one takes tens of seconds, and the update is half a step."""

    def report(progress: MicroBatchProgress) -> None:
        say(f"update: micro-batch {progress.done}/{progress.total}, {progress.padded_tokens:,} tokens through the "
            f"model, {progress.elapsed_s:.0f} s")

    return report
