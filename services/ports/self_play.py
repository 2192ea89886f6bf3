"""The self-play loop's hooks (services/coordinator/loop.py): the in-process trainer and the periodic evaluation.

Adapters: `azr.embedded_trainer.InProcessTrainer` (PolicyUpdater, embedded profile) and
`services.evaluation.periodic.PeriodicEvaluation` (StepEvaluation). The distributed loop reads the trainer's policy
version from a `PolicyVersionBoard` (services/ports/queues.py) instead of updating in-process.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from services.json_types import JsonObject
from services.records import Episode
from services.records.updates import StepUpdate


class PolicyUpdater(Protocol):
    """The in-process trainer: one TRR++ update on a step's episodes, checkpoint, push; returns its report."""

    def update_on(self, episodes: Sequence[Episode], step: int) -> StepUpdate:
        """The policy version after the update, and the update's report, weights and checkpoint when one was made."""


class StepEvaluation(Protocol):
    """A benchmark run after some steps (services.evaluation.periodic.PeriodicEvaluation: CRUXEval-O/-I)."""

    def due(self, step: int) -> bool:
        """Whether `step` ends with an evaluation."""

    def evaluate(self, step: int) -> JsonObject:
        """Evaluate the policy now; the entries join the step's metrics line (`eval/...`, `time/eval`)."""
