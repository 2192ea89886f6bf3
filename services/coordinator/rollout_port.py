"""How the coordinator reaches the two roles: in-process over an InferenceEngine, or the proposer/solver HTTP APIs."""

from __future__ import annotations

from typing import Protocol, Sequence

from services.algorithm.task_types import TaskType
from services.ports import InferenceEngine, SamplingParams
from services.records import Proposal, SolveTask, Solution
from services.rollouts.proposing import ProposeContext, propose
from services.rollouts.solving import solve


class Rollouts(Protocol):
    """Generation for both roles; parsing included, checking not (the coordinator checks through its executor)."""

    def propose(self, task_type: TaskType, contexts: Sequence[ProposeContext], sampling: SamplingParams,
                num_inputs: int) -> list[Proposal]:
        """One proposal per context, in order."""

    def solve(self, task_type: TaskType, tasks: Sequence[SolveTask], sampling: SamplingParams) -> list[list[Solution]]:
        """`sampling.n` solutions per task, in task order."""


class EngineRollouts:
    """Rollouts on an in-process InferenceEngine (the embedded profile; also what the HTTP APIs run)."""

    def __init__(self, engine: InferenceEngine) -> None:
        self.engine = engine

    def propose(self, task_type: TaskType, contexts: Sequence[ProposeContext], sampling: SamplingParams,
                num_inputs: int) -> list[Proposal]:
        return propose(self.engine, task_type, contexts, sampling, num_inputs)

    def solve(self, task_type: TaskType, tasks: Sequence[SolveTask], sampling: SamplingParams) -> list[list[Solution]]:
        return solve(self.engine, task_type, tasks, sampling)
