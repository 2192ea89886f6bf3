"""The Rollouts port: how the coordinator reaches the two roles, in-process over an InferenceEngine or through the
proposer/solver HTTP APIs.

Adapters: `services.rollouts.engine_rollouts.EngineRollouts` (embedded, and `azr eval`) and
`services.rollouts.http_rollouts.HttpRollouts` (distributed; the proposer and solver APIs behind it call
`services.rollouts.proposing.propose` and `services.rollouts.solving.solve` over their own engine, as EngineRollouts
does). The periodic CRUXEval evaluation
(services/evaluation) runs on the same port, through `solve` with `greedy_sampling`, so it reaches the model exactly
as self-play's solver does in both profiles.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from services.algorithm.prompts import ReferenceTriplet
from services.algorithm.task_types import TaskType
from services.ports.inference import SamplingParams
from services.records import Proposal, Solution, SolveTask


@dataclass(frozen=True)
class ProposeContext:
    """What one proposer prompt shows: K reference triplets (deduction/abduction) or one program (induction).

    The caller decides it (sampled from the buffer by the coordinator, or given in a proposer API request), so a
    proposal records exactly what its prompt contained."""

    references: Sequence[ReferenceTriplet]
    reference_ids: Sequence[str] = field(default_factory=tuple)


@dataclass(frozen=True)
class ProposalsAndSolutions:
    """What `Rollouts.propose_and_solve` generated: proposals per context and one solution per task, in order."""

    proposals: dict[TaskType, list[Proposal]]
    solutions: dict[TaskType, list[Solution]]


def greedy_sampling(max_new_tokens: int) -> SamplingParams:
    """Greedy decoding (temperature 0, one answer per task) for evaluation; rollouts never use it (docs/design.md
    §2.7)."""
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

    def propose_and_solve(self, contexts: Mapping[TaskType, Sequence[ProposeContext]],
                          tasks: Mapping[TaskType, Sequence[SolveTask]], sampling: SamplingParams,
                          num_inputs: int) -> ProposalsAndSolutions:
        """`propose` and `solve` (one solution per task, `sampling.n` = 1) as one generation: the local engine
        decodes both roles' rows in one batch (one tail instead of two), the HTTP adapter sends every request at
        once."""

    def prompt_tokens(self, instructions: Sequence[str]) -> list[int]:
        """The length in tokens of the full prompt (R1 wrapper or chat template included) of each task instruction."""
