"""The pieces whose adapter a setting picks, built from settings: the store, the episode channels, the executor, the
inference engine, the rollouts, the metric sinks and the self-play loop around them. The process builders
(`azr/factory/`'s other modules) and the small commands (`validate`, `seeds import`, `eval`) take them from here. (The
adapters keep their own low-level openers, `services.store.open_store` and `services.queues.open_*`, which take
explicit arguments for tests and tools; the commands do not call them.)

Which adapter a setting picks:
- store: SQLAlchemy over `database_url` (the run's SQLite file embedded, PostgreSQL distributed);
- episode channels (queue, applied-episode log, policy-version board): Redis when `queue_backend = redis`, else
  in-process objects the loop and the in-process trainer share;
- executor: RQ jobs on `azr worker executor` processes when the queues are Redis (distributed), else an in-process
  pool of sandbox workers (embedded; also what a worker, `validate` and `eval` run themselves);
- inference engine: SGLang servers when `inference_backend = sglang` (only the served model's tokenizer is loaded,
  from the directory the model-prep step prepared), else the local transformers engine;
- rollouts: over a local engine when the process holds one, else HTTP to the proposer/solver APIs; the step, the
  loop options, the periodic evaluation and the loop are the same in both profiles.

A piece that must be closed is registered on the `closers` stack it is built with, so its process closes it with
everything else it opened, in reverse order; what needs no closing registers nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry

from executor_svc.executor import Executor
from services.coordinator.loop import LoopOptions, SelfPlayLoop, StepObserver
from services.coordinator.step import SelfPlayStep, StepConfig
from services.coordinator.step_metrics import MetricsLog
from services.ports import (
    AppliedEpisodeLog,
    CodeExecutor,
    EpisodeQueue,
    InferenceEngine,
    MetricSink,
    PolicyUpdater,
    PolicyVersionBoard,
    Rollouts,
    StepStore,
    TripletStore,
)
from services.settings import Settings
from services.store import SqlTripletStore

if TYPE_CHECKING:
    from trainer_svc.format_warmup import WarmupPlan

Say = Callable[[str], None]


def triplet_store(settings: Settings, *, create: bool = False) -> SqlTripletStore:
    """The buffers, steps and episodes on `database_url`. `create=True` brings the schema to head first (the
    embedded profile, `azr seeds import`); otherwise a database not at head is refused (`azr db upgrade`)."""
    from services.store import open_store

    return open_store(settings.storage.database_url, buffer_cap=settings.rollout.buffer_cap, create=create)


def run_store(settings: Settings, closers: ExitStack, *, create: bool = False) -> SqlTripletStore:
    """`triplet_store` with the run registered under its resolved settings (what a self-play process opens), riding
    through database outages of up to `database_outage_s`; closed with `closers`."""
    store = closers.enter_context(triplet_store(settings, create=create))
    store.outage_s = settings.storage.database_outage_s
    store.ensure_run(settings.run.run_id, settings.resolved())
    return store


@dataclass
class EpisodeChannels:
    """What carries episodes and the policy version between the self-play loop and the trainer. In-process
    channels are plain objects: the loop and the in-process trainer must share these, never open a second set."""

    queue: EpisodeQueue
    applied_log: AppliedEpisodeLog
    board: PolicyVersionBoard


def episode_channels(settings: Settings) -> EpisodeChannels:
    """Redis streams and keys under the run's prefix when `queue_backend = redis`, else in-process ones."""
    from services.queues import open_applied_episode_log, open_episode_queue, open_policy_version_board

    storage, run_id = settings.storage, settings.run.run_id
    return EpisodeChannels(queue=open_episode_queue(storage, run_id),
                           applied_log=open_applied_episode_log(storage, run_id),
                           board=open_policy_version_board(storage, run_id))


def rollouts(settings: Settings, closers: ExitStack, engine: InferenceEngine | None = None) -> Rollouts:
    """Rollouts over `engine` when the process holds one (embedded run, eval), else HTTP to the proposer and solver
    APIs (the distributed coordinator; its connections closed with `closers`)."""
    if engine is not None:
        from services.rollouts.engine_rollouts import EngineRollouts

        return EngineRollouts(engine, reject_multiple_functions=settings.rollout.reject_multiple_functions)
    from services.rollouts.http_rollouts import HttpRollouts

    api = settings.api
    http = HttpRollouts(api.proposer_url, api.solver_url, api.api_token.get_secret_value(),
                        outage_s=api.rollout_api_outage_s)
    closers.callback(http.close)
    return http


def local_executor(settings: Settings, closers: ExitStack,
                   metrics_registry: CollectorRegistry | None = None) -> Executor:
    """An in-process pool of sandbox workers (its task counts and latencies go into `metrics_registry` if given),
    closed with `closers`."""
    from executor_svc.prometheus_metrics import ExecutorMetrics

    metrics = ExecutorMetrics(metrics_registry) if metrics_registry is not None else None
    return closers.enter_context(Executor.from_settings(settings.executor, metrics=metrics))


def code_executor(settings: Settings, closers: ExitStack, metrics_registry: CollectorRegistry | None = None,
                  ride_through_redis_outages: bool = False) -> CodeExecutor:
    """RQ jobs on `executor` workers when the queues are Redis, else `local_executor` (RQ workers record their own
    metrics). `ride_through_redis_outages`: retry RQ calls through an outage of up to `redis_outage_s` (the
    coordinator); otherwise they fail at once (the APIs answer 503)."""
    if settings.storage.queue_backend == "redis":
        from executor_svc.rq_client import RQCodeExecutor
        from services.queues.factory import outage_policy
        from services.queues.redis_outages import NO_RETRY

        return RQCodeExecutor.from_settings(
            settings.executor, settings.storage.redis_url,
            outages=outage_policy(settings.storage) if ride_through_redis_outages else NO_RETRY)
    return local_executor(settings, closers, metrics_registry)


def executor_queue_depth(executor: CodeExecutor) -> Callable[[], int] | None:
    """How many executor jobs wait, for a Prometheus gauge; None for an in-process executor (nothing queues)."""
    from executor_svc.rq_client import RQCodeExecutor

    if isinstance(executor, RQCodeExecutor):
        return lambda: executor.queue.count
    return None


def inference_engine(settings: Settings, closers: ExitStack) -> InferenceEngine:
    """SGLang servers (distributed) or the local model, closed with `closers`; InferenceError naming what is
    missing."""
    if settings.inference.inference_backend == "sglang":
        from services.inference.prepared_model import prepared_model_dir
        from services.inference.sglang_client import SGLangClient

        client = SGLangClient.from_settings(settings.inference, prepared_model_dir(settings.inference.model))
        closers.callback(client.close)
        return client
    from services.inference.engine_choice import build_local_engine
    from services.inference.model_registry import resolve_model

    engine = build_local_engine(resolve_model(settings.inference.model), settings.inference, settings.run)
    closers.callback(engine.close)
    return engine


def metric_sinks(settings: Settings, closers: ExitStack, say: Say) -> list[MetricSink]:
    """The TensorBoard and W&B copies of the metrics lines the settings ask for, closed with `closers`."""
    from services.reporting.metric_sinks import open_metric_sinks

    sinks = open_metric_sinks(settings.observability, settings.run, say, settings.resolved())
    for sink in sinks:
        closers.callback(sink.close)
    return sinks


def metrics_log(settings: Settings, closers: ExitStack, say: Say) -> MetricsLog:
    """The run's `metrics.jsonl`, each line also to the sinks the settings ask for (closed with `closers`)."""
    from services.reporting.metric_sinks import open_metric_sinks

    log = MetricsLog(settings.run.run_dir / "metrics.jsonl",
                     sinks=open_metric_sinks(settings.observability, settings.run, say, settings.resolved()))
    closers.callback(log.close)
    return log


@dataclass
class SelfPlay:
    """The step runner and the loop that drives it."""

    step_runner: SelfPlayStep
    loop: SelfPlayLoop


def self_play(settings: Settings, closers: ExitStack, *, store: StepStore, executor: CodeExecutor,
              rollouts: Rollouts, episodes: EpisodeQueue, say: Say, updater: PolicyUpdater | None = None,
              versions: PolicyVersionBoard | None = None, on_step: StepObserver | None = None,
              steps_are_total: bool = False, continues_after_step: int = 0) -> SelfPlay:
    """Algorithm 1 from settings, the same in both profiles: the step (propose, validate, solve, reward, episodes;
    its thread pool closed with `closers`) and the loop (seeding, steps, policy versions, periodic evaluation, the
    metrics log and its sinks, closed with `closers`).
    `updater`: the embedded profile's in-process trainer; `versions`: the distributed trainer's policy-version board.
    `steps_are_total`: `steps` is the run's target step (`azr coordinator`), not a number of steps more (`azr run`).
    `continues_after_step`: a new run from another run's snapshot numbers its steps after that run's."""
    from services.evaluation.periodic import PeriodicEvaluation

    run, rollout = settings.run, settings.rollout
    runner = SelfPlayStep(run_id=run.run_id, store=store, executor=executor, rollouts=rollouts, episodes=episodes,
                          config=StepConfig.from_settings(rollout),
                          executor_parallelism=rollout.coordinator_executor_parallelism, progress=say)
    closers.callback(runner.close)
    options = LoopOptions(steps=run.steps, seed=run.seed, seed_target=rollout.batch_size * rollout.seed_multiplier,
                          seed_max_rounds=rollout.seed_max_rounds, max_staleness=rollout.max_staleness,
                          until_step=run.steps if steps_are_total else None,
                          continues_after_step=continues_after_step)
    evaluation = PeriodicEvaluation.from_settings(settings.observability, rollout, runner.rollouts, executor, say)
    metrics = metrics_log(settings, closers, say)
    loop = SelfPlayLoop(run_id=run.run_id, step_runner=runner, store=store, metrics=metrics, options=options,
                        updater=updater, versions=versions, progress=say, evaluation=evaluation, on_step=on_step)
    return SelfPlay(step_runner=runner, loop=loop)


def warmup_plan(settings: Settings, *, per_type: int | None = None, epochs: int | None = None) -> WarmupPlan:
    """What the format warm-up reads of the run's sections; `per_type` / `epochs` given (`azr warmup`'s options)
    replace the LoRA section's `format_warmup_per_type` / `format_warmup_epochs`."""
    from trainer_svc.format_warmup import WarmupPlan

    rollout, lora = settings.rollout, settings.trainer.lora
    return WarmupPlan(seed_files=list(rollout.seed_files), references_k=rollout.references_k,
                      induction_inputs=rollout.induction_inputs, max_prompt_tokens=rollout.max_prompt_tokens,
                      seed=settings.run.seed, model=settings.inference.model,
                      per_type=lora.format_warmup_per_type if per_type is None else per_type,
                      epochs=lora.format_warmup_epochs if epochs is None else epochs)


def import_seed_files(settings: Settings, store: TripletStore, executor: CodeExecutor, say: Say) -> None:
    """Import `seed_files` into the buffers (each row validated by the executor) before any model seeding."""
    from services.store.seed_import import import_seeds

    for path in settings.rollout.seed_files:
        summary = import_seeds(Path(path), executor, store)
        say(f"imported seeds from {path}: stored {summary.stored}, duplicate {summary.duplicate}, "
            f"rejected {summary.rejected}")
