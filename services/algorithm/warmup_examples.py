"""The format warm-up's examples: the authors' seed triplets written as well-formed proposals. Pure.

The self-play issue allows, as a switch named on every result it touches, a short supervised pass before self-play
when the model writes almost no valid task at step 0 (Qwen2.5-Coder-1.5B: 0 of 24 deduction proposals valid,
docs/runs/selfplay-cpu). Each example is one proposer prompt built the way a run builds it (K references drawn from
the seed triplets, the target's own triplet never among them; induction: one seed program) and, as its response, the
seed triplet in the template the reward code reads: a one-sentence plan in the think block, then the program and its
input (induction: the seed's inputs and message) inside `<answer>`. Only proposer prompts: a solver example would
teach the answers of the seed tasks the run's solvers are asked. Never CRUXEval, never the probe's rows.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from services.algorithm.prompts import ReferenceTriplet, proposer_prompt
from services.algorithm.response_format import ANSWER_CLOSE, ANSWER_OPEN, THINK_CLOSE
from services.algorithm.seed_programs import strip_seed_program
from services.algorithm.task_types import TaskType
from services.json_types import JsonValue

__all__ = ["PLANS", "WarmupExample", "induction_proposal_response", "program_proposal_response", "warmup_examples"]

PLANS: Mapping[TaskType, str] = {
    TaskType.DEDUCTION: "I will write a function f, different from the reference snippets, whose output for one input "
                        "takes step-by-step reasoning to deduce, and give that input.",
    TaskType.ABDUCTION: "I will write a function f, different from the reference snippets, from whose output it takes "
                        "reasoning to find an input that produces it, and give one such input.",
    TaskType.INDUCTION: "I will choose inputs that cover different behaviours of the snippet, so that its outputs "
                        "show what it does, and a message that hints at it without giving the code.",
}
"""The think block of each kind's example: a plan, not an answer (the run's own thinking replaces it)."""


@dataclass(frozen=True)
class WarmupExample:
    """One supervised example: the proposer instruction (as the run renders it) and the response to learn."""

    task_type: TaskType
    instruction: str
    response: str
    seed_index: int
    """Row of the seed file the response was written from (for the record; its triplet is never a reference)."""


def program_proposal_response(task_type: TaskType, program: str, given_input: str) -> str:
    """A deduction or abduction proposal (Figs 34-35's format) of ``program`` and ``given_input``."""
    return (f" {PLANS[task_type]} {THINK_CLOSE}\n{ANSWER_OPEN}\n```python\n{program}\n```\n\n"
            f"```input\n{given_input}\n```\n{ANSWER_CLOSE}")


def induction_proposal_response(inputs: Sequence[str], message: str) -> str:
    """An induction proposal (Fig 36's format): every input in its own ```input block, then the ```message."""
    blocks = "\n\n".join(f"```input\n{value}\n```" for value in inputs)
    return (f" {PLANS[TaskType.INDUCTION]} {THINK_CLOSE}\n{ANSWER_OPEN}\n{blocks}\n\n```message\n{message}\n```\n"
            f"{ANSWER_CLOSE}")


def warmup_examples(io_rows: Sequence[Mapping[str, JsonValue]], f_rows: Sequence[Mapping[str, JsonValue]], *,
                    per_type: int, references_k: int, num_inputs: int, fits: Callable[[str], bool], rng: random.Random
                    ) -> list[WarmupExample]:
    """``per_type`` examples of each proposer kind, interleaved by type (deduction, abduction, induction, ...).

    ``io_rows``: the authors' seed triplets (`snippet`, `input`, `output`); ``f_rows``: their induction seeds
    (`snippet`, `inputs`, `message`), of which only those with at least ``num_inputs`` inputs are used. A target's
    program is never among its references, nor is any seed row with the same program. ``fits``
    says whether a rendered instruction is within the prompt budget; references are redrawn until it does (the
    run's rule). Targets are distinct seed rows per type, never the identity triplet (row 0)."""
    if len(io_rows) < references_k + 2:
        raise ValueError(f"the warm-up needs at least {references_k + 2} seed triplets, got {len(io_rows)}")
    by_type: dict[TaskType, list[WarmupExample]] = {}
    programs = [strip_seed_program(row["snippet"]) for row in io_rows]
    for task_type in (TaskType.DEDUCTION, TaskType.ABDUCTION):
        targets = rng.sample(range(1, len(io_rows)), min(per_type, len(io_rows) - 1))
        examples = []
        for index in targets:
            others = [ReferenceTriplet(programs[i], row["input"], row["output"]) for i, row in enumerate(io_rows)
                      if programs[i] != programs[index]]  # the seed files repeat some programs
            instruction = ""
            for _ in range(100):
                references = rng.sample(others, references_k)
                instruction = proposer_prompt(task_type, references, num_inputs=num_inputs)
                if fits(instruction):
                    break
            else:
                continue  # no draw of references fits: the run would skip this prompt too
            response = program_proposal_response(task_type, programs[index], io_rows[index]["input"])
            examples.append(WarmupExample(task_type, instruction, response, index))
        by_type[task_type] = examples
    usable = [i for i, row in enumerate(f_rows) if i > 0 and len(row["inputs"]) >= num_inputs]
    induction = []
    for index in rng.sample(usable, min(per_type, len(usable))):
        row = f_rows[index]
        program = strip_seed_program(row["snippet"])
        instruction = proposer_prompt(TaskType.INDUCTION, [ReferenceTriplet(program, "", "")], num_inputs=num_inputs)
        if fits(instruction):
            induction.append(WarmupExample(TaskType.INDUCTION, instruction,
                                           induction_proposal_response(row["inputs"][:num_inputs], row["message"]),
                                           index))
    by_type[TaskType.INDUCTION] = induction
    longest = max(len(examples) for examples in by_type.values())
    return [by_type[t][i] for i in range(longest) for t in TaskType if i < len(by_type[t])]
