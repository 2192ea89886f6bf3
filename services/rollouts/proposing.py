"""The proposer role (Figs 34-36): prompts from buffer entries, generation, parsing into `Proposal` records.

Pure apart from the InferenceEngine call: which references a prompt shows is decided by the caller (sampled from
the buffer, or given in an API request), so a proposal records exactly what its prompt contained.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

from services.algorithm.parsing import InductionProposal, ProgramProposal, parse_response
from services.algorithm.prompts import ReferenceTriplet, proposer_prompt
from services.algorithm.response_format import ParseFailed
from services.algorithm.task_types import Role, TaskType
from services.ports import Completion, InferenceEngine, SamplingParams
from services.records import Proposal, ProposedTask


@dataclass(frozen=True)
class ProposeContext:
    """What one proposer prompt shows: K reference triplets (deduction/abduction) or one program (induction)."""

    references: Sequence[ReferenceTriplet]
    reference_ids: Sequence[str] = field(default_factory=tuple)


def proposer_instruction(task_type: TaskType, context: ProposeContext, num_inputs: int) -> str:
    """The task instruction of Figs 34-36 for one context (the R1 wrapper is the engine's job)."""
    return proposer_prompt(task_type, list(context.references), num_inputs=num_inputs)


def parse_proposal(task_type: TaskType, text: str, context: ProposeContext,
                   num_inputs: int) -> tuple[ProposedTask | None, str | None]:
    """(task, None) when the response parses into a task, else (None, parse-failure reason)."""
    parsed = parse_response(task_type, Role.PROPOSE, text, num_inputs=num_inputs)
    if isinstance(parsed, ParseFailed):
        return None, parsed.reason.value
    if isinstance(parsed, ProgramProposal):
        return ProposedTask(program=parsed.program.source, input=parsed.input), None
    if isinstance(parsed, InductionProposal):
        shown = context.references[0].program
        return ProposedTask(program=shown, inputs=list(parsed.inputs), message=parsed.message), None
    raise TypeError(f"unexpected proposer parse result {type(parsed).__name__}")


def proposal_record(task_type: TaskType, prompt_ids: list[int], completion: Completion, context: ProposeContext,
                    num_inputs: int) -> Proposal:
    """A `Proposal` from one completion of one proposer prompt."""
    task, failure = parse_proposal(task_type, completion.text, context, num_inputs)
    return Proposal(task_type=task_type, prompt_ids=prompt_ids, response_ids=completion.output_ids,
                    behaviour_logprobs=completion.logprobs, text=completion.text, task=task, parse_failure=failure,
                    reference_ids=list(context.reference_ids), weight_version=completion.weight_version,
                    finish_reason=completion.finish_reason)


def propose(engine: InferenceEngine, task_type: TaskType, contexts: Sequence[ProposeContext],
            sampling: SamplingParams, num_inputs: int) -> list[Proposal]:
    """One proposal per context (sampling.n must be 1: each proposal has its own references), in context order."""
    if sampling.n != 1:
        raise ValueError("proposer rollouts take n=1 per prompt (one rollout per prompt, Table 3)")
    if not contexts:
        return []
    prompts = [engine.prompt_ids(proposer_instruction(task_type, context, num_inputs)) for context in contexts]
    completions = engine.generate(prompts, sampling)
    return [proposal_record(task_type, prompt, group[0], context, num_inputs)
            for prompt, group, context in zip(prompts, completions, contexts)]
