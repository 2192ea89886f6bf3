"""The sizes and sampling of one self-play step, from the rollout settings (the embedded profile only shrinks sizes)."""

from __future__ import annotations

from dataclasses import dataclass

from services.algorithm.prompts import ReferenceTriplet
from services.ports import SamplingParams
from services.records import Triplet
from services.settings import RolloutSettings


@dataclass(frozen=True)
class StepConfig:
    """The sizes and sampling of one step (from `RolloutSettings`; the embedded profile only shrinks sizes)."""

    batch_size: int  # B per (task type x role)
    references_k: int  # K
    learnability_samples: int  # n
    induction_inputs: int  # N
    max_response_tokens: int
    temperature: float
    top_p: float
    max_prompt_tokens: int = 0  # 0: prompts are not length-checked
    unlearnable_proposal_reward: float = 0.0  # r̄ ∈ {0, 1}: 0 (Eq 4) or the released code's −0.5
    induction_gold_imports: bool = False  # the released code's induction check: gold imports before the answer
    solve_samples_per_task: int = 1  # k answers per solve task (the paper: 1)
    solver_wrong_answer_reward: float = -0.5  # Eq 6's well-formed wrong answer (the paper: −0.5)
    proposer_invalid_task_reward: float = -1.0  # a well-formed proposal whose task is invalid (the paper: −1)

    @classmethod
    def from_settings(cls, settings: RolloutSettings) -> StepConfig:
        return cls(batch_size=settings.batch_size, references_k=settings.references_k,
                   learnability_samples=settings.learnability_samples, induction_inputs=settings.induction_inputs,
                   max_response_tokens=settings.max_response_tokens, temperature=settings.temperature,
                   top_p=settings.top_p, max_prompt_tokens=settings.max_prompt_tokens,
                   unlearnable_proposal_reward=settings.unlearnable_proposal_reward,
                   induction_gold_imports=settings.induction_gold_imports,
                   solve_samples_per_task=settings.solve_samples_per_task,
                   solver_wrong_answer_reward=settings.solver_wrong_answer_reward,
                   proposer_invalid_task_reward=settings.proposer_invalid_task_reward)

    def sampling(self, n: int = 1, seed: int | None = None) -> SamplingParams:
        return SamplingParams(max_new_tokens=self.max_response_tokens, temperature=self.temperature,
                              top_p=self.top_p, n=n, seed=seed)


def to_reference(entry: Triplet) -> ReferenceTriplet:
    """A buffer triplet as a proposer prompt shows it."""
    return ReferenceTriplet(entry.program, entry.input, entry.output)

