"""Read the six kinds of model response (paper Figs 34-39) into tasks and answers, or say why not. Pure.

No I/O, nothing executed, and no public function raises on any `str`. `read_response` first reads the generation
(`response_format.read_generation`: format verdict and answer text), then extracts the task or the answer from the
answer text by the authors' rules (docs/reading-rules.md), whatever the format verdict: the two are independent, and
the reward combines them (Eq 6, `objectives.propose_reward` / `solve_reward`).

Extraction rules (regular expressions with DOTALL and IGNORECASE, applied to the answer text):
- Deduction / abduction proposer (Figs 34, 35): the program is the FIRST fenced block
  ```` ```(?:python\\s*)?\\n?(.*?)\\n?``` ```` (a tag other than `python` is not skipped: an ```input block written
  before the code is taken for the code and has no `def`); the input is the first ```input block, else the first
  `# Input:` line. The program must contain a `def name(` (any indentation) and, with `reject_multiple_functions` (the
  authors' setting for Qwen models, our default), exactly one; a single function not named `f` is renamed to `f`, its
  calls too (`\\bname\\s*(`). Nothing else in the program changes (self-play programs are stored unaltered, §3.3.1).
- Induction proposer (Fig 36): every ```input block, stripped; at least N of them, the LAST N kept; the message is
  the first ```message block, else `<message>...</message>`, else a `# Message:` line.
- Deduction / abduction solver (Figs 38, 37): the LAST match of the first rule that matches among ```output
  (```input) block, `# Output:` line, `output(...)`, `<output>...`, "the output is ..."; else the whole answer text.
  Not stripped (quotes matter). Always yields an answer, so only the format check can make it a format error.
- Induction solver (Fig 39): the LAST fenced block of any tag, stripped; none is a format error.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from services.algorithm.prompts import DEFAULT_NUM_INPUTS
from services.algorithm.response_format import (
    Generation,
    ParseFailure,
    learnability_answer_text,
    read_generation,
)
from services.algorithm.task_types import ENTRY_FUNCTION, Role, TaskType

__all__ = [
    "AbductionSolution",
    "DeductionSolution",
    "Extracted",
    "InductionProposal",
    "InductionSolution",
    "ParseFailed",
    "ParseFailure",
    "ProgramProposal",
    "Reading",
    "extract",
    "learnability_answer",
    "read_response",
]

_FLAGS = re.DOTALL | re.IGNORECASE
CODE_BLOCK = re.compile(r"```(?:python\s*)?\n?(.*?)\n?```", _FLAGS)
DEF_NAME = re.compile(r"^\s*def\s+(\w+)\s*\(", re.MULTILINE)


def _block(tag: str) -> re.Pattern[str]:
    return re.compile(rf"```{tag}\s*\n?(.*?)\n?```", _FLAGS)


def _line(label: str) -> re.Pattern[str]:
    return re.compile(rf"# {label}:\s*(.*?)(?=\n```|$)", _FLAGS)


INPUT_BLOCK, OUTPUT_BLOCK, MESSAGE_BLOCK = _block("input"), _block("output"), _block("message")
MESSAGE_TAG = re.compile(r"<message>\s*(.*?)\s*</message>", _FLAGS)


def _solver_chain(word: str) -> tuple[re.Pattern[str], ...]:
    """The authors' fallbacks for a solver's predicted input / output, in the order they are tried."""
    return (_block(word), _line(word.capitalize()), re.compile(rf"{word}\s*\((.*?)\)", _FLAGS),
            re.compile(rf"<{word}>\s*(.*?)(?:</{word}>|\s*$)", _FLAGS),
            re.compile(rf"the {word} is\s*(.*?)\.?$", _FLAGS))


SOLVER_RULES = ("block", "line", "call", "tag", "phrase")
"""Names of the solver chain's rules, in order; `whole` when none matched and the whole answer text is taken."""
_CHAINS = {"input": _solver_chain("input"), "output": _solver_chain("output")}


@dataclass(frozen=True)
class ParseFailed:
    """No task or answer could be extracted: the reason and a short human-readable detail."""

    reason: ParseFailure
    detail: str = ""


@dataclass(frozen=True)
class ProgramProposal:
    """A deduction or abduction proposer's task (Figs 34, 35): a program and one input (argument source text)."""

    task_type: TaskType
    program: str
    input: str
    renamed_from: str | None = None  # the function's own name when it was renamed to `f`


@dataclass(frozen=True)
class InductionProposal:
    """An induction proposer's task (Fig 36): N inputs for the shown program, and a message for the solver."""

    inputs: tuple[str, ...]
    message: str


@dataclass(frozen=True)
class DeductionSolution:
    """A deduction solver's predicted output (Fig 38), as Python source text."""

    output: str
    rule: str  # which rule found it: one of SOLVER_RULES, or `whole`


@dataclass(frozen=True)
class AbductionSolution:
    """An abduction solver's proposed input (Fig 37), as argument source text."""

    input: str
    rule: str


@dataclass(frozen=True)
class InductionSolution:
    """An induction solver's program (Fig 39), as written (it is not renamed)."""

    program: str


Extracted = ProgramProposal | InductionProposal | DeductionSolution | AbductionSolution | InductionSolution


def solution_text(extracted: object) -> str | None:
    """A solver's answer as source text (predicted output, proposed input, or program); None for anything else."""
    if isinstance(extracted, DeductionSolution):
        return extracted.output
    if isinstance(extracted, AbductionSolution):
        return extracted.input
    if isinstance(extracted, InductionSolution):
        return extracted.program
    return None


@dataclass(frozen=True)
class Reading:
    """Everything the reward needs from one response's text: the format verdict and the extracted task/answer."""

    task_type: TaskType
    role: Role
    generation: Generation
    extracted: Extracted | None
    extraction_failure: ParseFailed | None

    @property
    def format_ok(self) -> bool:
        return self.generation.format_ok

    @property
    def solver_answer(self) -> str | None:
        """A solver's answer as source text (the output, the input or the program); None for a proposer's task or
        when nothing was extracted."""
        return solution_text(self.extracted)

    @property
    def failure(self) -> ParseFailure | None:
        """The reason that decides a −1, if any: for a proposer an extraction failure first (nothing to validate),
        then a format error; for a solver a format error first (its answer is never checked), then extraction."""
        extraction = self.extraction_failure.reason if self.extraction_failure else None
        if self.role is Role.PROPOSE:
            return extraction or self.generation.format_failure
        return self.generation.format_failure or extraction


# ---------------------------------------------------------------------------------------------- extraction


def _program_proposal(task_type: TaskType, answer: str,
                      reject_multiple_functions: bool) -> ProgramProposal | ParseFailed:
    code_match = CODE_BLOCK.search(answer)
    input_match = INPUT_BLOCK.search(answer) or _line("Input").search(answer)
    if code_match is None:
        return ParseFailed(ParseFailure.MISSING_CODE_BLOCK, "no fenced code block in the answer")
    if input_match is None:
        return ParseFailed(ParseFailure.MISSING_INPUT_BLOCK, "no ```input block and no '# Input:' line")
    code = code_match.group(1).strip()
    names = DEF_NAME.findall(code)
    if not names:
        return ParseFailed(ParseFailure.NO_FUNCTION_DEF, "the first code block defines no function")
    if reject_multiple_functions and len(names) > 1:
        return ParseFailed(ParseFailure.MULTIPLE_FUNCTIONS, f"{len(names)} function definitions: {names[:4]}")
    name = names[0]
    if name != ENTRY_FUNCTION:
        code = re.sub(rf"def\s+{re.escape(name)}\s*\(", f"def {ENTRY_FUNCTION}(", code)
        code = re.sub(rf"\b{re.escape(name)}\s*\(", f"{ENTRY_FUNCTION}(", code)
    return ProgramProposal(task_type=task_type, program=code, input=input_match.group(1).strip(),
                           renamed_from=None if name == ENTRY_FUNCTION else name)


def _induction_proposal(answer: str, num_inputs: int) -> InductionProposal | ParseFailed:
    inputs = [match.group(1).strip() for match in INPUT_BLOCK.finditer(answer)]
    if not inputs:
        return ParseFailed(ParseFailure.MISSING_INPUT_BLOCK, "no ```input block in the answer")
    if len(inputs) < num_inputs:
        return ParseFailed(ParseFailure.WRONG_INPUT_COUNT, f"{len(inputs)} ```input blocks, need {num_inputs}")
    message = MESSAGE_BLOCK.search(answer) or MESSAGE_TAG.search(answer) or _line("Message").search(answer)
    if message is None:
        return ParseFailed(ParseFailure.MISSING_MESSAGE, "no ```message block, <message> tag or '# Message:' line")
    return InductionProposal(inputs=tuple(inputs[-num_inputs:]), message=message.group(1).strip())


def _solver_value(answer: str, word: str) -> tuple[str, str]:
    """(value, rule): the last match of the first matching rule of the chain, else the whole answer text."""
    for rule, pattern in zip(SOLVER_RULES, _CHAINS[word]):
        matches = list(pattern.finditer(answer))
        if matches:
            return matches[-1].group(1), rule
    return answer, "whole"


def _induction_solution(answer: str) -> InductionSolution | ParseFailed:
    matches = list(CODE_BLOCK.finditer(answer))
    if not matches:
        return ParseFailed(ParseFailure.MISSING_CODE_BLOCK, "no fenced code block in the answer")
    return InductionSolution(program=matches[-1].group(1).strip())


def extract(task_type: TaskType, role: Role, answer: str, *, num_inputs: int = DEFAULT_NUM_INPUTS,
            reject_multiple_functions: bool = True) -> Extracted | ParseFailed:
    """The task or answer in an answer text (the text inside <answer>), by the rules of the module docstring.

    Raises ValueError only for `num_inputs < 1` or an unknown group (configuration errors, never the text's fault).
    """
    if num_inputs < 1:
        raise ValueError(f"num_inputs must be at least 1, got {num_inputs}")
    task_type, role = TaskType(task_type), Role(role)
    if role is Role.PROPOSE:
        if task_type is TaskType.INDUCTION:
            return _induction_proposal(answer, num_inputs)
        return _program_proposal(task_type, answer, reject_multiple_functions)
    if task_type is TaskType.DEDUCTION:
        return DeductionSolution(*_solver_value(answer, "output"))
    if task_type is TaskType.ABDUCTION:
        return AbductionSolution(*_solver_value(answer, "input"))
    return _induction_solution(answer)


def read_response(task_type: TaskType, role: Role, response: str, *, num_inputs: int = DEFAULT_NUM_INPUTS,
                  reject_multiple_functions: bool = True) -> Reading:
    """Read one response of a (task type, role) group: format verdict, answer text, extracted task or answer."""
    generation = read_generation(response)
    result = extract(task_type, role, generation.answer, num_inputs=num_inputs,
                     reject_multiple_functions=reject_multiple_functions)
    if isinstance(result, ParseFailed):
        return Reading(task_type=TaskType(task_type), role=Role(role), generation=generation, extracted=None,
                       extraction_failure=result)
    return Reading(task_type=TaskType(task_type), role=Role(role), generation=generation, extracted=result,
                   extraction_failure=None)


def learnability_answer(task_type: TaskType, response: str) -> str | None:
    """The answer a learnability sample gives, checked whatever its format (Eq 4 counts correct answers): the
    predicted output / input text, or the program; None only for an induction sample without a code block."""
    return solution_text(extract(task_type, Role.SOLVE, learnability_answer_text(response)))
