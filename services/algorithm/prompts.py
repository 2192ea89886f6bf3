"""Prompt rendering for the six (task type x role) groups and the R1 wrapper (paper Figs 33-39). Pure: no I/O.

The texts live in `prompt_texts.py`; this module fills their placeholders. Choices where the paper is silent follow
the authors' code (data_construction/prompts.py in LeapLabTHU/Absolute-Zero-Reasoner):
- {LIST_OF_FORBIDDEN_PACKAGES} (Figs 34, 35) is the Fig 8 list joined with ", " in the paper's order, after the
  template's ": " (the authors' `', '.join(banned_keywords)`).
- {CODE_REFERENCES_FROM_BUFFER} (Figs 34, 35): each of the K references, numbered from 0, as
  <snippet_i> + ```python/```input/```output blocks + </snippet_i>, one after the other (see `format_reference_block`).
- {SNIPPET_FROM_BUFFER} (Fig 36): the program followed by a call-site line `f(<|YOUR INPUT WILL BE PLUGGED HERE|>)`,
  the authors' `code_suffix`, which tells the proposer what an input is: the argument text of one call to `f`.
- {INPUT_OUTPUT_PAIRS} (Fig 39): the given pairs, numbered from 0, as ```input_i / ```output_i blocks.
- Base models get `render_r1_prompt(task_prompt)`; instruct models get `r1_chat_messages(task_prompt)` and their own
  chat template (DESIGN §4), in which case the response need not begin inside `<think>`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from services.algorithm.prompt_texts import (
    ABDUCTION_PROPOSER_TEMPLATE,
    ABDUCTION_SOLVER_TEMPLATE,
    DEDUCTION_PROPOSER_TEMPLATE,
    DEDUCTION_SOLVER_TEMPLATE,
    INDUCTION_PROPOSER_TEMPLATE,
    INDUCTION_SOLVER_TEMPLATE,
    R1_SYSTEM_INSTRUCTION,
    R1_TEMPLATE,
)
from services.algorithm.prompt_views import InductionPuzzle, ReferenceSnippet
from services.algorithm.task_types import ENTRY_FUNCTION, FORBIDDEN_MODULES, TaskType

__all__ = [
    "DEFAULT_NUM_INPUTS",
    "INDUCTION_CALL_SITE",
    "R1_SYSTEM_INSTRUCTION",
    "ReferenceTriplet",
    "abduction_proposer_prompt",
    "abduction_solver_prompt",
    "deduction_proposer_prompt",
    "deduction_solver_prompt",
    "format_forbidden_list",
    "format_io_pairs",
    "format_reference_block",
    "induction_proposer_prompt",
    "induction_snippet",
    "induction_solver_prompt",
    "proposer_prompt",
    "r1_chat_messages",
    "render_r1_prompt",
    "solver_prompt",
]

DEFAULT_NUM_INPUTS = 10
"""N, the number of inputs an induction proposer writes (Table 3 / DESIGN §1)."""

INDUCTION_CALL_SITE = f"{ENTRY_FUNCTION}(<|YOUR INPUT WILL BE PLUGGED HERE|>)"
"""Line appended to the Fig 36 snippet (the authors' `code_suffix`), showing where each proposed input goes."""


@dataclass(frozen=True)
class ReferenceTriplet:
    """A plain `ReferenceSnippet`, for callers that do not hold a buffer record."""

    program: str
    input: str
    output: str


# ---------------------------------------------------------------------------------------------- R1 wrapper (Fig 33)


def render_r1_prompt(instruction: str) -> str:
    """Fig 33: wrap a task prompt in the Deepseek R1 template for a base model; ends with "Assistant: <think>"."""
    return R1_TEMPLATE.format(TASK_INSTRUCTION=instruction)


def r1_chat_messages(instruction: str) -> list[dict[str, str]]:
    """Fig 33 for instruct models: the R1 instruction as the system message, the task prompt as the user message."""
    return [
        {"role": "system", "content": R1_SYSTEM_INSTRUCTION},
        {"role": "user", "content": instruction},
    ]


# ---------------------------------------------------------------------------------------------- placeholder blocks


def format_forbidden_list(forbidden: Sequence[str]) -> str:
    """Figs 34-35 {LIST_OF_FORBIDDEN_PACKAGES}: the names joined with ", " in the given (Fig 8) order."""
    return ", ".join(forbidden)


def format_reference_block(references: Sequence[ReferenceSnippet]) -> str:
    """Figs 34-35 {CODE_REFERENCES_FROM_BUFFER}: the K references in order, each tagged <snippet_i> (i from 0).

    Layout is the authors' (the paper does not print one); the block carries no trailing newline.
    """
    if not references:
        raise ValueError("a code proposer needs at least one reference triplet (the buffer always holds Fig 5's)")
    return "\n".join(_format_reference(index, reference) for index, reference in enumerate(references))


def _format_reference(index: int, reference: ReferenceSnippet) -> str:
    return (
        f"<snippet_{index}>\n"
        f"```python\n{reference.program}\n```\n"
        f"```input\n{reference.input}\n```\n"
        f"```output\n{reference.output}\n```\n"
        f"</snippet_{index}>"
    )


def induction_snippet(program: str) -> str:
    """Fig 36 {SNIPPET_FROM_BUFFER}: the program, then the call-site line `INDUCTION_CALL_SITE`."""
    return f"{program}\n{INDUCTION_CALL_SITE}"


def format_io_pairs(pairs: Sequence[tuple[str, str]]) -> str:
    """Fig 39 {INPUT_OUTPUT_PAIRS}: each (input, output) as ```input_i and ```output_i blocks, i from 0."""
    return "\n".join(
        f"```input_{index}\n{given_input}\n```\n```output_{index}\n{given_output}\n```"
        for index, (given_input, given_output) in enumerate(pairs)
    )


# ---------------------------------------------------------------------------------------------- proposer (Figs 34-36)


def abduction_proposer_prompt(
    references: Sequence[ReferenceSnippet], forbidden: Sequence[str] = FORBIDDEN_MODULES
) -> str:
    """Fig 34: ask for a new (program, input) whose input is hard to recover from the output."""
    return ABDUCTION_PROPOSER_TEMPLATE.format(
        LIST_OF_FORBIDDEN_PACKAGES=format_forbidden_list(forbidden),
        CODE_REFERENCES_FROM_BUFFER=format_reference_block(references),
    )


def deduction_proposer_prompt(
    references: Sequence[ReferenceSnippet], forbidden: Sequence[str] = FORBIDDEN_MODULES
) -> str:
    """Fig 35: ask for a new (program, input) whose output is hard to predict."""
    return DEDUCTION_PROPOSER_TEMPLATE.format(
        LIST_OF_FORBIDDEN_PACKAGES=format_forbidden_list(forbidden),
        CODE_REFERENCES_FROM_BUFFER=format_reference_block(references),
    )


def induction_proposer_prompt(program: str, num_inputs: int = DEFAULT_NUM_INPUTS) -> str:
    """Fig 36: ask for `num_inputs` inputs to a buffer program plus a message for the solver."""
    if num_inputs < 2:
        # The solver sees the first N//2 pairs and is judged on the rest: both halves must be non-empty.
        raise ValueError(f"num_inputs must be at least 2, got {num_inputs}")
    return INDUCTION_PROPOSER_TEMPLATE.format(NUM_INPUTS=num_inputs, SNIPPET_FROM_BUFFER=induction_snippet(program))


def proposer_prompt(
    task_type: TaskType,
    references: Sequence[ReferenceSnippet],
    *,
    num_inputs: int = DEFAULT_NUM_INPUTS,
    forbidden: Sequence[str] = FORBIDDEN_MODULES,
) -> str:
    """Figs 34-36: the proposer prompt for `task_type`, without the R1 wrapper.

    Deduction and abduction show all `references` (K=6 in the paper). Induction takes exactly one reference and
    shows only its program (sampled from D_abd ∪ D_ded, §3.3.1); `forbidden` does not apply to it (Fig 36 has no list).
    """
    match task_type:
        case TaskType.ABDUCTION:
            return abduction_proposer_prompt(references, forbidden)
        case TaskType.DEDUCTION:
            return deduction_proposer_prompt(references, forbidden)
        case TaskType.INDUCTION:
            if len(references) != 1:
                raise ValueError(f"the induction proposer takes exactly one program, got {len(references)}")
            return induction_proposer_prompt(references[0].program, num_inputs)
    raise ValueError(f"unknown task type: {task_type!r}")


# ---------------------------------------------------------------------------------------------- solver (Figs 37-39)


def abduction_solver_prompt(program: str, output: str) -> str:
    """Fig 37: show the program and an output; the solver answers with an input."""
    return ABDUCTION_SOLVER_TEMPLATE.format(SNIPPET=program, OUTPUT=output)


def deduction_solver_prompt(program: str, given_input: str) -> str:
    """Fig 38: show the program and an input; the solver answers with the output."""
    return DEDUCTION_SOLVER_TEMPLATE.format(SNIPPET=program, INPUT=given_input)


def induction_solver_prompt(given_pairs: Sequence[tuple[str, str]], message: str) -> str:
    """Fig 39: show the given (input, output) pairs and the proposer's message; the solver answers with a program.

    The caller passes only the visible pairs (the first N//2); the program itself is never shown.
    """
    if not given_pairs:
        raise ValueError("the induction solver must be shown at least one (input, output) pair")
    return INDUCTION_SOLVER_TEMPLATE.format(INPUT_OUTPUT_PAIRS=format_io_pairs(given_pairs), MESSAGE=message)


def solver_prompt(task_type: TaskType, task: ReferenceSnippet | InductionPuzzle) -> str:
    """Figs 37-39: the solver prompt for `task_type`, without the R1 wrapper.

    Deduction and abduction take a triplet (the answer half is left out); induction takes a puzzle whose
    `given_pairs` are the first N//2 pairs (`services.records.InductionTask`), so hidden pairs never reach the prompt.
    """
    if task_type in (TaskType.ABDUCTION, TaskType.DEDUCTION):
        if not isinstance(task, ReferenceSnippet):
            raise TypeError(f"a {task_type} solver prompt needs a (program, input, output) triplet, got {task!r}")
        if task_type is TaskType.ABDUCTION:
            return abduction_solver_prompt(task.program, task.output)
        return deduction_solver_prompt(task.program, task.input)
    if task_type is TaskType.INDUCTION:
        if not isinstance(task, InductionPuzzle):
            raise TypeError(f"an induction solver prompt needs given_pairs and a message, got {task!r}")
        return induction_solver_prompt(task.given_pairs, task.message)
    raise ValueError(f"unknown task type: {task_type!r}")
