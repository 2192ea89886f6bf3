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
- `rollouts`: Rollouts, the two roles as the coordinator reaches them (`services.coordinator.engine_rollouts`,
  `services.coordinator.http_rollouts`).
- `self_play`: the loop's hooks PolicyUpdater and StepEvaluation.
- `reporting`: MetricSink (TensorBoard, Weights & Biases).
- `prompting`: ReferenceSnippet, InductionPuzzle, what prompts read of a task.

Protocols that only one service folder uses stay in it (`executor_svc.channel.WorkerChannel`,
`trainer_svc.server_sync.WeightTarget`, the views of `trainer_svc.prometheus_metrics`).
"""

from services.ports.executor import CodeExecutor
from services.ports.inference import Completion, InferenceEngine, InferenceError, SamplingParams
from services.ports.prompting import InductionPuzzle, ReferenceSnippet
from services.ports.queues import (
    AppliedEpisodeLog,
    Delivery,
    EpisodeQueue,
    PolicyVersionBoard,
    PolicyVersionRegression,
)
from services.ports.reporting import MetricSink
from services.ports.rollouts import Rollouts, greedy_sampling
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
    "InductionPuzzle",
    "InferenceEngine",
    "InferenceError",
    "InsertOutcome",
    "MetricSink",
    "Pingable",
    "PolicyUpdater",
    "PolicyVersionBoard",
    "PolicyVersionRegression",
    "ReferenceSnippet",
    "Rollouts",
    "RunSummary",
    "SamplingParams",
    "StepEvaluation",
    "StepRecord",
    "StepStore",
    "TripletStore",
    "greedy_sampling",
]
