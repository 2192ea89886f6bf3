"""Ports: every Protocol of the core, the interfaces it uses to reach the outside, one module per family; each name
is re-exported here (`from services.ports import X`).

- `executor`: CodeExecutor (`executor_svc.executor.Executor` in-process, `executor_svc.rq_client.RQCodeExecutor`
  over RQ).
- `store`: TripletStore, StepStore, Pingable and their records (`services.store.SqlTripletStore`; SQLite embedded,
  PostgreSQL distributed).
- `queues`: EpisodeQueue, AppliedEpisodeLog, PolicyVersionBoard (`services.queues`: Redis or in-process, one
  contract).
- `inference`: InferenceEngine, SamplingParams, Completion (`services.inference`: the local transformers engine or
  the SGLang HTTP client).
- `rollouts`: Rollouts, the two roles as the coordinator reaches them (`services.rollouts.engine_rollouts` in
  process, `services.rollouts.http_rollouts` through the proposer/solver APIs), and ProposeContext, what one
  proposer prompt shows.
- `self_play`: the loop's hooks PolicyUpdater and StepEvaluation.
- `reporting`: MetricSink (TensorBoard, Weights & Biases).

Protocols that only one service folder uses stay in it (`executor_svc.channel.WorkerChannel`,
`trainer_svc.server_sync.WeightTarget`, the views of `trainer_svc.prometheus_metrics`); what the prompts read of a task
(ReferenceSnippet, InductionPuzzle) stays beside them in `services.algorithm.prompt_views`.
"""

from services.ports.executor import CodeExecutor
from services.ports.inference import Completion, InferenceEngine, InferenceError, SamplingParams
from services.ports.queues import (
    AppliedEpisodeLog,
    Delivery,
    EpisodeQueue,
    PolicyVersionBoard,
    PolicyVersionRegression,
)
from services.ports.reporting import MetricSink
from services.ports.rollouts import ProposalsAndSolutions, ProposeContext, Rollouts, greedy_sampling
from services.ports.self_play import PolicyUpdater, StepEvaluation
from services.ports.store import (
    BufferEntry,
    BufferStats,
    InsertOutcome,
    Pingable,
    RunSummary,
    StepRecord,
    StepStore,
    TripletStore,
)

__all__ = [
    "AppliedEpisodeLog",
    "BufferEntry",
    "BufferStats",
    "CodeExecutor",
    "Completion",
    "Delivery",
    "EpisodeQueue",
    "InferenceEngine",
    "InferenceError",
    "InsertOutcome",
    "MetricSink",
    "Pingable",
    "PolicyUpdater",
    "PolicyVersionBoard",
    "PolicyVersionRegression",
    "ProposalsAndSolutions",
    "ProposeContext",
    "Rollouts",
    "RunSummary",
    "SamplingParams",
    "StepEvaluation",
    "StepRecord",
    "StepStore",
    "TripletStore",
    "greedy_sampling",
]
