"""How the coordinator reaches the two roles: in-process over an InferenceEngine, or the proposer/solver HTTP APIs.

The periodic CRUXEval evaluation (services/evaluation) runs on the same port, through `solve` with
`greedy_sampling`, so it reaches the model exactly as self-play's solver does in both profiles.
"""

from __future__ import annotations

from typing import Protocol, Sequence

from services.algorithm.task_types import TaskType
from services.ports import InferenceEngine, SamplingParams
from services.records import Proposal, SolveTask, Solution
from services.rollouts.proposing import ProposeContext, propose
from services.rollouts.solving import solve


def greedy_sampling(max_new_tokens: int) -> SamplingParams:
    """Greedy decoding (temperature 0, one answer per task) for evaluation; rollouts never use it (DESIGN.md §2.7)."""
    return SamplingParams(max_new_tokens=max_new_tokens, temperature=0.0, top_p=1.0, top_k=-1, n=1)


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
