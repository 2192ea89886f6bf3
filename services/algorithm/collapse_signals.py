"""What a collapsing policy looks like in its own text, read per response. Pure.

A reward can rise because answers got shorter or copied an example, not because they got right (the 60-step CPU run
learned to answer every CRUXEval-O row with the prompt's own example). These readings let the step's metrics line
show it while it happens (services/coordinator/step_metrics.py: `collapse_metrics`):

- `copies_prompt_example`: the answer (solver) or the proposed input (proposer) is the example the prompt itself shows
  (Figs 34-39 each show one: `{'age': 20, 'city': 'New York'}`, `'John', {...}`, `def f(a): return a`), compared
  after removing whitespace; a solver's answer the reward code cannot extract (the example program written without
  its code fence, or inside a tag of its own such as `<python>`) is read from its `<answer>` tag with the fence marks
  and tags removed;
- `think_chars`: the length of the `<think>` block, in characters (0 without `</think>`);
- `proposal_shape`: whether a proposer's response holds a fenced program and an ```input block anywhere (inside
  `<answer>` or not: a response that writes its task outside the tag is a different failure from no task at all).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from services.algorithm.parsing import InductionProposal, ProgramProposal, read_response, solution_text
from services.algorithm.response_format import read_generation
from services.algorithm.task_types import Role, TaskType

PROMPT_EXAMPLES: dict[tuple[TaskType, Role], str] = {
    (TaskType.DEDUCTION, Role.SOLVE): "{'age': 20, 'city': 'New York'}",
    (TaskType.ABDUCTION, Role.SOLVE): "'John', {'age': 20, 'city': 'New York'}",
    (TaskType.INDUCTION, Role.SOLVE): "def f(a):\n    return a",
    (TaskType.DEDUCTION, Role.PROPOSE): "'John', {'age': 20, 'city': 'New York'}",
    (TaskType.ABDUCTION, Role.PROPOSE): "'John', {'age': 20, 'city': 'New York'}",
    (TaskType.INDUCTION, Role.PROPOSE): "'John', {'age': 20, 'city': 'New York'}",
}
"""The example answer each prompt shows (services/algorithm/prompt_texts.py: Figs 34-39's "Example Output" /
"Example Format"); for proposers, the example input."""

_WHITESPACE = re.compile(r"\s+")
_FENCED_PROGRAM = re.compile(r"```(?:python|py)?\s*\n\s*(?:import|from|class|def)\b", re.IGNORECASE)
_INPUT_BLOCK = re.compile(r"```input\b", re.IGNORECASE)
_THINK = re.compile(r"(?s)^<think>(.*?)</think>")
_MARKUP = re.compile(r"```[A-Za-z]*|</?[A-Za-z]+>")  # fence marks and bare tags (`<python>`, `</code>`)


def _squeezed(text: str) -> str:
    return _WHITESPACE.sub("", text)


@dataclass(frozen=True)
class ProposalShape:
    """What a proposer's response holds, anywhere in its text."""

    has_program: bool
    has_input: bool


def proposal_shape(response: str) -> ProposalShape:
    return ProposalShape(has_program=bool(_FENCED_PROGRAM.search(response)),
                         has_input=bool(_INPUT_BLOCK.search(response)))


def think_chars(response: str) -> int:
    """Characters inside the response's `<think>` block (the prompt opens it), 0 when it is never closed."""
    match = _THINK.match(read_generation(response).text)
    return len(match.group(1).strip()) if match else 0


def answer_text(task_type: TaskType, role: Role, response: str) -> str | None:
    """The answer as the reward code reads it: a solver's output / input / program, a proposer's (first) input;
    None when nothing is extracted."""
    reading = read_response(task_type, role, response)
    if role is Role.SOLVE:
        return solution_text(reading.extracted)
    if isinstance(reading.extracted, ProgramProposal):
        return reading.extracted.input
    if isinstance(reading.extracted, InductionProposal):
        return reading.extracted.inputs[0]
    return None


def copies_prompt_example(task_type: TaskType, role: Role, response: str) -> bool:
    """Whether the response's answer is the prompt's own example (whitespace ignored); for an induction proposer,
    whether any of its inputs is."""
    example = _squeezed(PROMPT_EXAMPLES[(task_type, role)])
    if role is Role.PROPOSE and task_type is TaskType.INDUCTION:
        reading = read_response(task_type, role, response)
        inputs = reading.extracted.inputs if isinstance(reading.extracted, InductionProposal) else ()
        return any(_squeezed(value) == example for value in inputs)
    answer = answer_text(task_type, role, response)
    if answer is None and role is Role.SOLVE:  # a copy is a copy, fenced or not: the format is judged elsewhere
        answer = _MARKUP.sub("", read_generation(response).answer)
    return answer is not None and _squeezed(answer) == example
