"""The Rollouts port (services/ports/rollouts.py) in-process: both roles over an InferenceEngine (the embedded
profile; also what the proposer and solver APIs run). `http_rollouts.HttpRollouts` is the distributed adapter."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from services.algorithm.task_types import TaskType
from services.ports import InferenceEngine, ProposalsAndSolutions, ProposeContext, SamplingParams
from services.records import Proposal, Solution, SolveTask
from services.rollouts.proposing import propose, propose_and_solve
from services.rollouts.solving import solve


class EngineRollouts:
    """Rollouts on an in-process InferenceEngine (the embedded profile; also what the HTTP APIs run).

    `reject_multiple_functions`: the proposer reading rule (services/algorithm/parsing.py), from the settings."""

    def __init__(self, engine: InferenceEngine, *, reject_multiple_functions: bool = True) -> None:
        self.engine = engine
        self.reject_multiple_functions = reject_multiple_functions

    def propose(self, contexts: Mapping[TaskType, Sequence[ProposeContext]], sampling: SamplingParams,
                num_inputs: int) -> dict[TaskType, list[Proposal]]:
        return propose(self.engine, contexts, sampling, num_inputs, self.reject_multiple_functions)

    def propose_and_solve(self, contexts: Mapping[TaskType, Sequence[ProposeContext]],
                          tasks: Mapping[TaskType, Sequence[SolveTask]], sampling: SamplingParams,
                          num_inputs: int) -> ProposalsAndSolutions:
        return propose_and_solve(self.engine, contexts, tasks, sampling, num_inputs, self.reject_multiple_functions)

    def prompt_tokens(self, instructions: Sequence[str]) -> list[int]:
        return [len(self.engine.prompt_ids(instruction)) for instruction in instructions]

    def solve(self, tasks: Mapping[TaskType, Sequence[SolveTask]],
              sampling: SamplingParams) -> dict[TaskType, list[list[Solution]]]:
        return solve(self.engine, tasks, sampling)
