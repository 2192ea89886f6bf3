"""The embedded profile in one process: SQLite buffers, in-process queue, process sandbox, local engine, trainer.

`EmbeddedRun` wires the same pieces the distributed profile runs as services, so `azr run` exercises the real
code path: episodes go through the in-process EpisodeQueue and the trainer runs the distributed trainer's update
cycle on them (azr/embedded_trainer.py: bf16 weights pushed to the engine after every update, the
full checkpoint every `checkpoint_every` updates, acknowledged only after it is durable). A resumed run first makes
again the updates that were pushed but not in the last full checkpoint, from the episodes the store kept.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from azr.embedded_trainer import InProcessTrainer, replay_uncommitted_steps
from services.coordinator.prometheus_metrics import CoordinatorMetrics
from services.coordinator.step_metrics import MetricsLog
from services.settings import Settings
from services.torch_threads import SharedCoreThreads, threads_beside_executor
from trainer_svc.ppo_update import MicroBatchProgress
from trainer_svc.resume import load_or_restore


class EmbeddedRun:
    """Everything `azr run` needs, built from settings; `run()` seeds (first time) and runs the steps."""

    def __init__(self, settings: Settings, progress: Callable[[str], None],
                 prometheus: CoordinatorMetrics | None = None) -> None:
        """`prometheus`: record the steps and the executor's tasks there (what `azr run` serves on `/metrics`)."""
        from azr import factory
        from services.inference.causal_lm import silence_weight_progress_bars
        from services.inference.engine_choice import build_local_engine
        from services.inference.local_engine import LocalEngine
        from services.inference.model_registry import resolve_model

        self.settings, self.say = settings, progress
        self.closers: list[Callable[[], None]] = []
        silence_weight_progress_bars()  # a load or save after every update: no library bar in the run's terminal
        try:
            self.store = factory.run_store(settings, create=True)
            self.closers.append(self.store.close)
            self.executor = factory.local_executor(settings, prometheus.registry if prometheus is not None else None)
            self.closers.append(self.executor.close)
            progress(f"executor ready: {settings.executor_workers} workers, isolation {self.executor.isolation}")
            threads = self._torch_threads(settings)
            model_dir = resolve_model(settings.model, say=progress)
            self.loaded = load_or_restore(settings.run_dir, Path(model_dir), settings, say=progress)
            served = self.loaded.source
            self.engine = build_local_engine(served, settings, say=progress)
            if threads is not None:
                if isinstance(self.engine, LocalEngine):
                    self.engine.before_forward = threads.before_generation_forward
                else:
                    self.engine.generation_threads = threads.generation_threads
            version = int(self.loaded.trainer.policy_version)
            if version:
                progress(f"resumed from {self.loaded.checkpoint or served} (policy version {version}, "
                         f"trainer step {self.loaded.trainer.step})")
            else:
                progress(f"model {settings.model} loaded from {served}; generating in "
                         f"{self.engine.model_info()['dtype']} (AZR_LOCAL_ENGINE, AZR_LLAMA_CPP_BASE)")
            channels = factory.episode_channels(settings)  # shared by the loop and the in-process trainer
            self.queue, self.board = channels.queue, channels.board
            if prometheus is not None:
                prometheus.watch_episode_queue(self.queue)
            trainer = InProcessTrainer(loaded=self.loaded, settings=settings, queue=self.queue,
                                       applied_log=channels.applied_log, engines=[self.engine], board=self.board,
                                       before_update=threads.for_update if threads is not None else None)
            self.loaded.trainer.on_micro_batch = update_progress_line(progress)
            trainer.start()  # the engine serves the trainer's bf16 weights, the board its version
            self.trainer = trainer
            replay_uncommitted_steps(self.store, settings.run_id, trainer, self.queue, progress)
            built = factory.self_play(settings, store=self.store, executor=self.executor,
                                      rollouts=factory.rollouts(settings, self.engine), episodes=self.queue,
                                      metrics=MetricsLog(settings.run_dir / "metrics.jsonl"), say=progress,
                                      updater=trainer,
                                      on_step=prometheus.observe_step if prometheus is not None else None)
            self.step_runner, self.loop = built.step_runner, built.loop
            self.closers.append(self.step_runner.close)
        except BaseException:
            self.close()
            raise

    def _torch_threads(self, settings: Settings) -> SharedCoreThreads | None:
        """AZR_TORCH_THREADS=N fixes the count; 0 (the default) shares the cores with the sandbox workers."""
        threads = threads_beside_executor(settings.torch_threads, settings.executor_workers,
                                          self.executor.jobs_running)
        if threads is None:
            self.say(f"torch uses {settings.torch_threads} CPU thread(s) (AZR_TORCH_THREADS)")
        else:
            self.say(f"torch uses {threads.idle_threads} CPU thread(s), {threads.busy_threads} while sandbox jobs "
                     f"run (AZR_TORCH_THREADS=0; N fixes it)")
        return threads

    def run(self) -> list[dict[str, Any]]:
        if self.loop.last_step() == 0:
            from azr.factory import import_seed_files

            import_seed_files(self.settings, self.store, self.executor, self.say)
        lines = self.loop.run(policy_version=int(self.loaded.trainer.policy_version))
        checkpoint = self.trainer.finish()  # a normal end or a Ctrl-C at a step boundary: nothing left uncommitted
        if checkpoint is not None:
            self.say(f"full checkpoint {checkpoint} written")
        return lines

    def close(self) -> None:
        for close in reversed(self.closers):
            close()
        self.closers.clear()


def embedded_database_url(settings: Settings) -> str:
    """The run's own SQLite file unless AZR_DATABASE_URL names another database."""
    if os.environ.get("AZR_DATABASE_URL"):
        return settings.database_url
    return f"sqlite:///{(settings.run_dir / 'buffers.sqlite3').resolve()}"


def update_progress_line(say: Callable[[str], None]) -> Callable[[MicroBatchProgress], None]:
    """A line per micro-batch of an update: on CPU one takes tens of seconds, and the update is half a step."""

    def report(progress: MicroBatchProgress) -> None:
        say(f"update: micro-batch {progress.done}/{progress.total}, {progress.padded_tokens:,} tokens through the "
            f"model, {progress.elapsed_s:.0f} s")

    return report
