"""The proposer role (Figs 34-36): prompts from buffer entries, generation, parsing into `Proposal` records.

Pure apart from the InferenceEngine call: which references a prompt shows is decided by the caller (sampled from
the buffer, or given in an API request), so a proposal records exactly what its prompt contained.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from services.algorithm.parsing import InductionProposal, ParseFailure, ProgramProposal, Reading, read_response
from services.algorithm.prompts import proposer_prompt
from services.algorithm.task_types import Role, TaskType
from services.ports import Completion, InferenceEngine, SamplingParams
from services.ports.rollouts import ProposalsAndSolutions, ProposeContext
from services.records import Proposal, ProposedInductionTask, ProposedIOTask, ProposedTask, Solution, SolveTask
from services.rollouts.solving import solution_record, solver_instruction


def proposer_instruction(task_type: TaskType, context: ProposeContext, num_inputs: int) -> str:
    """The task instruction of Figs 34-36 for one context (the R1 wrapper is the engine's job)."""
    return proposer_prompt(task_type, list(context.references), num_inputs=num_inputs)


def proposed_task(reading: Reading, context: ProposeContext) -> ProposedTask | None:
    """The task a proposer reading extracted (whatever its format verdict), or None."""
    extracted = reading.extracted
    if isinstance(extracted, ProgramProposal):
        return ProposedIOTask(program=extracted.program, input=extracted.input)
    if isinstance(extracted, InductionProposal):
        shown = context.references[0].program
        return ProposedInductionTask(program=shown, inputs=list(extracted.inputs), message=extracted.message)
    return None


def _value(failure: ParseFailure | None) -> str | None:
    return failure.value if failure is not None else None


def proposal_record(task_type: TaskType, prompt_ids: list[int], completion: Completion, context: ProposeContext,
                    num_inputs: int, reject_multiple_functions: bool = True) -> Proposal:
    """A `Proposal` from one completion of one proposer prompt: its task is extracted whatever the format verdict
    (a valid task joins its buffer even when its response earns the format penalty, §3.3.2)."""
    reading = read_response(task_type, Role.PROPOSE, completion.text, num_inputs=num_inputs,
                            reject_multiple_functions=reject_multiple_functions)
    failure = reading.extraction_failure
    return Proposal(task_type=task_type, prompt_ids=prompt_ids, response_ids=completion.output_ids,
                    behaviour_logprobs=completion.logprobs, text=completion.text,
                    task=proposed_task(reading, context), parse_failure=failure.reason.value if failure else None,
                    format_ok=reading.format_ok,
                    format_failure=_value(reading.generation.format_failure),
                    reference_ids=list(context.reference_ids), weight_version=completion.weight_version,
                    finish_reason=completion.finish_reason)


def propose(engine: InferenceEngine, contexts: Mapping[TaskType, Sequence[ProposeContext]],
            sampling: SamplingParams, num_inputs: int, reject_multiple_functions: bool = True
            ) -> dict[TaskType, list[Proposal]]:
    """One proposal per context of every task type, from ONE generation call (the engine batches them all), in
    context order per type. `sampling.n` must be 1: each proposal has its own references."""
    return propose_and_solve(engine, contexts, {}, sampling, num_inputs, reject_multiple_functions).proposals


def propose_and_solve(engine: InferenceEngine, contexts: Mapping[TaskType, Sequence[ProposeContext]],
                      tasks: Mapping[TaskType, Sequence[SolveTask]], sampling: SamplingParams, num_inputs: int,
                      reject_multiple_functions: bool = True) -> ProposalsAndSolutions:
    """One proposal per context and one solution per task (read, not checked), from ONE generation call: the
    engine decodes both roles' rows in one batch. `sampling.n` must be 1."""
    if sampling.n != 1:
        raise ValueError("proposer rollouts take n=1 per prompt (one rollout per prompt, Table 3)")
    order = [(task_type, context) for task_type, group in contexts.items() for context in group]
    prompts = [engine.prompt_ids(proposer_instruction(t, context, num_inputs)) for t, context in order]
    solve_order = [(task_type, task) for task_type, group in tasks.items() for task in group]
    solve_prompts = [engine.prompt_ids(solver_instruction(t, task)) for t, task in solve_order]
    completions = engine.generate(prompts + solve_prompts, sampling) if prompts or solve_prompts else []
    proposals: dict[TaskType, list[Proposal]] = {task_type: [] for task_type in contexts}
    for (task_type, context), prompt, group in zip(order, prompts, completions):
        proposals[task_type].append(proposal_record(task_type, prompt, group[0], context, num_inputs,
                                                    reject_multiple_functions))
    solutions: dict[TaskType, list[Solution]] = {task_type: [] for task_type in tasks}
    for (task_type, task), prompt, group in zip(solve_order, solve_prompts, completions[len(prompts):]):
        solutions[task_type].append(solution_record(task_type, task, prompt, group[0]))
    return ProposalsAndSolutions(proposals=proposals, solutions=solutions)
