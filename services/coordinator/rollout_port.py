"""How the coordinator reaches the two roles: in-process over an InferenceEngine, or the proposer/solver HTTP APIs.

The periodic CRUXEval evaluation (services/evaluation) runs on the same port, through `solve` with
`greedy_sampling`, so it reaches the model exactly as self-play's solver does in both profiles.
"""

from __future__ import annotations

from typing import Mapping, Protocol, Sequence

from services.algorithm.task_types import TaskType
from services.ports import InferenceEngine, SamplingParams
from services.records import Proposal, SolveTask, Solution
from services.rollouts.proposing import ProposeContext, propose
from services.rollouts.solving import solve


def greedy_sampling(max_new_tokens: int) -> SamplingParams:
    """Greedy decoding (temperature 0, one answer per task) for evaluation; rollouts never use it (DESIGN.md §2.7)."""
    return SamplingParams(max_new_tokens=max_new_tokens, temperature=0.0, top_p=1.0, top_k=-1, n=1)


class Rollouts(Protocol):
    """Generation for both roles; reading included, checking not (the coordinator checks through its executor).

    Each call takes the work of every task type at once, so a phase of a step is one batched generation (the local
    engine decodes all rows together; the HTTP adapter sends the types' requests concurrently)."""

    def propose(self, contexts: Mapping[TaskType, Sequence[ProposeContext]], sampling: SamplingParams,
                num_inputs: int) -> dict[TaskType, list[Proposal]]:
        """One proposal per context, in order, for each task type given."""

    def solve(self, tasks: Mapping[TaskType, Sequence[SolveTask]],
              sampling: SamplingParams) -> dict[TaskType, list[list[Solution]]]:
        """`sampling.n` solutions per task, in task order, for each task type given."""

    def prompt_tokens(self, instructions: Sequence[str]) -> list[int]:
        """The length in tokens of the full prompt (R1 wrapper or chat template included) of each task instruction."""


class EngineRollouts:
    """Rollouts on an in-process InferenceEngine (the embedded profile; also what the HTTP APIs run).

    `reject_multiple_functions`: the proposer reading rule (services/algorithm/parsing.py), from the settings."""

    def __init__(self, engine: InferenceEngine, *, reject_multiple_functions: bool = True) -> None:
        self.engine = engine
        self.reject_multiple_functions = reject_multiple_functions

    def propose(self, contexts: Mapping[TaskType, Sequence[ProposeContext]], sampling: SamplingParams,
                num_inputs: int) -> dict[TaskType, list[Proposal]]:
        return propose(self.engine, contexts, sampling, num_inputs, self.reject_multiple_functions)

    def prompt_tokens(self, instructions: Sequence[str]) -> list[int]:
        return [len(self.engine.prompt_ids(instruction)) for instruction in instructions]

    def solve(self, tasks: Mapping[TaskType, Sequence[SolveTask]],
              sampling: SamplingParams) -> dict[TaskType, list[list[Solution]]]:
        return solve(self.engine, tasks, sampling)
