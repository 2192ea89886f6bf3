"""The embedded profile in one process: SQLite buffers, in-process queue, process sandbox, local engine, trainer.

`EmbeddedRun` wires the same pieces the distributed profile runs as services, so `azr run` exercises the real
code path: episodes go through the in-process EpisodeQueue (read, applied once by id, acknowledged after the
checkpoint is durable), checkpoints are HF directories pushed to the engine with `update_weights`.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Callable, Sequence

from services.coordinator.loop import LoopOptions, SelfPlayLoop
from services.coordinator.prometheus_metrics import CoordinatorMetrics
from services.coordinator.rollout_port import EngineRollouts
from services.coordinator.step import SelfPlayStep, StepConfig
from services.coordinator.step_metrics import MetricsLog
from services.ports import EpisodeQueue
from services.records import Episode
from services.settings import Settings

TRAINER_CONSUMER = "embedded-trainer"


class InProcessTrainer:
    """The loop's PolicyUpdater: consume the step's episodes from the queue, update, checkpoint, push, ack."""

    def __init__(self, *, loaded: Any, settings: Settings, queue: EpisodeQueue, applied: Any, engines: Sequence[Any],
                 board: Any) -> None:
        self.loaded, self.settings, self.queue, self.applied = loaded, settings, queue, applied
        self.engines, self.board = list(engines), board

    @property
    def policy_version(self) -> int:
        return int(self.loaded.trainer.policy_version)

    def update_on(self, episodes: Sequence[Episode], step: int) -> dict[str, Any]:
        from trainer_svc.resume import checkpoint_trainer
        from trainer_svc.weight_push import push_weights

        expected = {episode.id for episode in episodes}
        deliveries = self.queue.read(TRAINER_CONSUMER, max(len(expected), 1) * 2, 0.0)
        batch, duplicates = [], 0
        for delivery in deliveries:
            if self.applied.was_applied(delivery.episode):
                duplicates += 1
            else:
                batch.append(delivery.episode)
        if not expected <= {d.episode.id for d in deliveries}:
            raise RuntimeError(f"step {step}: the queue handed out fewer episodes than the step published")
        report: dict[str, Any] = {"duplicates_skipped": duplicates}
        version = self.policy_version
        if batch:
            update = self.loaded.trainer.update(batch)
            report.update(update.model_dump(exclude={"groups"}))
            version += 1
            if self.loaded.trainer.step % self.settings.checkpoint_every == 0:
                path = checkpoint_trainer(self.loaded, self.settings.run_dir, self.settings, policy_version=version,
                                          applied_episode_ids=[e.id for e in batch])
                push_weights(path, version, self.engines, self.board.publish)
                report["checkpoint"] = str(path)
            else:
                self.loaded.trainer.policy_version = version
        self.applied.mark_applied_many(batch)
        self.queue.ack([d.delivery_id for d in deliveries])
        report["policy_version"] = version
        return report


class EmbeddedRun:
    """Everything `azr run` needs, built from settings; `run()` seeds (first time) and runs the steps."""

    def __init__(self, settings: Settings, progress: Callable[[str], None],
                 prometheus: CoordinatorMetrics | None = None) -> None:
        """`prometheus`: record the steps and the executor's tasks there (what `azr run` serves on `/metrics`)."""
        from executor_svc.executor import Executor
        from executor_svc.prometheus_metrics import ExecutorMetrics
        from services.evaluation.periodic import PeriodicEvaluation
        from services.inference.local_engine import LocalEngine
        from services.inference.model_registry import resolve_model
        from services.queues import open_applied_episode_log, open_episode_queue, open_policy_version_board
        from services.store import open_store
        from trainer_svc.resume import load_or_restore

        self.settings, self.say = settings, progress
        self.closers: list[Callable[[], None]] = []
        try:
            self.store = open_store(settings.database_url, buffer_cap=settings.buffer_cap, create=True)
            self.closers.append(self.store.close)
            self.store.ensure_run(settings.run_id, settings.resolved())
            self.executor = Executor.from_settings(
                settings, metrics=ExecutorMetrics(prometheus.registry) if prometheus is not None else None)
            self.closers.append(self.executor.close)
            progress(f"executor ready: {settings.executor_workers} workers, isolation {self.executor.isolation}")
            model_dir = resolve_model(settings.model)
            self.loaded = load_or_restore(settings.run_dir, Path(model_dir), settings)
            served = self.loaded.source
            self.engine = LocalEngine(served, device=settings.device, seed=settings.seed)
            version = int(self.loaded.trainer.policy_version)
            if version:
                self.engine.update_weights(str(served), version)
                progress(f"resumed from {served} (policy version {version}, trainer step {self.loaded.trainer.step})")
            else:
                progress(f"model {settings.model} loaded from {served}")
            self.queue = open_episode_queue(settings)
            if prometheus is not None:
                prometheus.watch_episode_queue(self.queue)
            self.board = open_policy_version_board(settings)
            self.board.publish(version)
            trainer = InProcessTrainer(loaded=self.loaded, settings=settings, queue=self.queue,
                                       applied=open_applied_episode_log(settings), engines=[self.engine],
                                       board=self.board)
            rollouts = EngineRollouts(self.engine, reject_multiple_functions=settings.reject_multiple_functions)
            self.step_runner = SelfPlayStep(run_id=settings.run_id, store=self.store, executor=self.executor,
                                            rollouts=rollouts, episodes=self.queue,
                                            config=StepConfig.from_settings(settings),
                                            executor_parallelism=settings.coordinator_executor_parallelism)
            self.closers.append(self.step_runner.close)
            options = LoopOptions(steps=settings.steps, seed=settings.seed,
                                  seed_target=settings.batch_size * settings.seed_multiplier,
                                  seed_max_rounds=settings.seed_max_rounds, max_staleness=settings.max_staleness)
            evaluation = PeriodicEvaluation.from_settings(settings, self.step_runner.rollouts, self.executor, progress)
            self.loop = SelfPlayLoop(run_id=settings.run_id, step_runner=self.step_runner, store=self.store,
                                     metrics=MetricsLog(settings.run_dir / "metrics.jsonl"), options=options,
                                     updater=trainer, progress=progress, evaluation=evaluation,
                                     on_step=prometheus.observe_step if prometheus is not None else None)
        except BaseException:
            self.close()
            raise

    def run(self) -> list[dict[str, Any]]:
        if self.loop.last_step() == 0:
            from services.cli.coordinator_cmd import import_seed_files

            import_seed_files(self.settings, self.store, self.executor)
        return self.loop.run(policy_version=int(self.loaded.trainer.policy_version))

    def close(self) -> None:
        for close in reversed(self.closers):
            close()
        self.closers.clear()


def embedded_database_url(settings: Settings) -> str:
    """The run's own SQLite file unless AZR_DATABASE_URL names another database."""
    if os.environ.get("AZR_DATABASE_URL"):
        return settings.database_url
    return f"sqlite:///{(settings.run_dir / 'buffers.sqlite3').resolve()}"

