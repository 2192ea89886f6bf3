"""Parse the six kinds of model response (paper Figs 34-39) into typed records, or say why not. Pure.

No I/O, nothing is executed (programs are only read with `ast.parse`), and no public function raises on any `str`:
each returns its success record or a `ParseFailed` with a `ParseFailure` reason. Every parse first checks the R1 format
(`response_format.split_r1_response`), then reads fenced blocks (`response_format.find_fenced_blocks`) inside the
answer only. The executor, not this module, decides whether a program or an input runs.

Decisions (paper = Zhao et al. 2025; reference = the authors' code, /work/shared/reference/azr_reference_code.md §3.4):
- Blocks whose content is only whitespace are ignored everywhere, so an echoed "put it in ```output``` tags" never
  counts as an answer. Content is stripped; code is also dedented (Fig 34 shows the code indented under a list item).
- A program comes from a ```python block (tags `python`, `py`, `python3`, any case); only if there is none, from an
  untagged ``` block. A block tagged `input`, `output`, `message` or anything else is never code.
- Which block when there are several (the reference's choices): a deduction/abduction proposer's program and input are
  the FIRST of their kind; an induction proposer needs at least N ```input blocks and keeps the LAST N (extra leading
  blocks are usually echoed examples), and its message is the FIRST ```message block; a solver's answer is the LAST
  block of its kind (drafts come first). The reference's looser fallbacks (`# Input:` lines, `<message>` tags, "the
  input is ...") are not accepted: the prompts ask for fences.
- Solver deduction / abduction (Figs 38, 37 ask for ```output / ```input): the last such block; if the answer holds
  no fence at all, the whole answer (stripped) is the value, as the reference's last fallback does; an answer with
  fences but none of the right kind is `missing_output_block` / `missing_input_block` (a mislabelled block is
  ambiguous: it may restate the program).
- Entry function: a program that parses must bind `f` at module level, by the executor's rule (`def f`, `class f`,
  `f = ...`, `import ... as f`, also inside if/try/with/loops; executor_svc/static_check.py), else
  `no_entry_function`. A program that does NOT parse is passed through with `syntax_ok=False` and imports `None`: the
  executor reports `syntax_error`, which is its verdict to give, not a format error.
- "The snippet should end with a return statement from the main function `f`, anything after will be removed"
  (Figs 34-36, 39): after the last top-level `def f`, every top-level statement is removed except function and class
  definitions and imports (they only bind names, and `f` may call a helper defined below it). So test calls,
  `print(f(...))`, `if __name__ == "__main__":` blocks, assignments and asserts after `f` go; everything before `f`
  stays. When something goes, comments after `f` go too and each kept definition follows one blank line; when nothing
  goes, the text is unchanged. Work is by whole lines: a removed statement sharing a line (`;`) with a kept one stays.
  Nothing is trimmed when `f` is not bound by a top-level `def`. The
  reference removes nothing in self-play and, when seeding, every top-level non-definition wherever it stands.
- Imports (`imported_modules`): module names of every `import a.b` (`a.b`) and `from a import b` (`a`; relative
  imports keep their dots), anywhere in the program, in source order, de-duplicated; `import_statements` holds the
  statements themselves (`ast.unparse`), the form the executor reports.
"""

from __future__ import annotations

import ast
import textwrap
from collections.abc import Collection, Sequence
from dataclasses import dataclass

from services.algorithm import thread_safe_ast
from services.algorithm.prompts import DEFAULT_NUM_INPUTS
from services.algorithm.response_format import (
    FencedBlock,
    ParseFailed,
    ParseFailure,
    R1Response,
    find_fenced_blocks,
    split_r1_response,
)
from services.algorithm.task_types import ENTRY_FUNCTION, Role, TaskType

__all__ = [
    "DEFAULT_NUM_INPUTS",
    "PYTHON_TAGS",
    "AbductionSolution",
    "DeductionSolution",
    "InductionProposal",
    "InductionSolution",
    "ParseFailed",
    "ParseFailure",
    "ParseResult",
    "ParsedProgram",
    "ProgramProposal",
    "binds_entry_function",
    "parse_abduction_proposal",
    "parse_abduction_solution",
    "parse_deduction_proposal",
    "parse_deduction_solution",
    "parse_induction_proposal",
    "parse_induction_solution",
    "parse_program",
    "parse_response",
    "trim_after_entry_function",
]

PYTHON_TAGS: frozenset[str] = frozenset({"python", "py", "python3"})
"""Fence tags that mark a program (compared in lower case)."""

_KEPT_AFTER_ENTRY = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Import, ast.ImportFrom)


@dataclass(frozen=True)
class ParsedProgram:
    """A program as the executor will receive it."""

    source: str  # dedented, newlines normalised to "\n", trimmed after `def f`
    syntax_ok: bool  # ast.parse accepts it; when False the executor reports syntax_error
    imported_modules: tuple[str, ...] | None  # None when it does not parse
    import_statements: tuple[str, ...] | None  # None when it does not parse
    trimmed: bool  # whether statements after `def f` were removed


@dataclass(frozen=True)
class ProgramProposal:
    """A deduction or abduction proposer's task (Figs 34, 35): a program and one input (argument source text)."""

    task_type: TaskType
    program: ParsedProgram
    input: str


@dataclass(frozen=True)
class InductionProposal:
    """An induction proposer's task (Fig 36): N inputs for the buffer program, and a message for the solver."""

    inputs: tuple[str, ...]
    message: str


@dataclass(frozen=True)
class DeductionSolution:
    """A deduction solver's predicted output (Fig 38), as Python source text."""

    output: str
    fenced: bool  # False when the whole answer was taken because it held no fence


@dataclass(frozen=True)
class AbductionSolution:
    """An abduction solver's proposed input (Fig 37), as argument source text."""

    input: str
    fenced: bool  # False when the whole answer was taken because it held no fence


@dataclass(frozen=True)
class InductionSolution:
    """An induction solver's program (Fig 39)."""

    program: ParsedProgram


ParseResult = (
    ProgramProposal | InductionProposal | DeductionSolution | AbductionSolution | InductionSolution | ParseFailed
)
"""What `parse_response` returns."""


# ---------------------------------------------------------------------------------------------- programs


def _try_parse(source: str) -> ast.Module | None:
    try:
        return thread_safe_ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError, OverflowError, Warning):
        return None  # Warning: a warnings filter set to "error" turns a SyntaxWarning into an exception


def binds_entry_function(tree: ast.Module) -> bool:
    """Whether a module-level statement (also inside if/try/with/loops) binds `f`; the executor's rule."""
    pending: list[ast.stmt] = list(tree.body)
    while pending:
        statement = pending.pop()
        if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            if statement.name == ENTRY_FUNCTION:
                return True
            continue  # names bound inside a body are not module level
        if isinstance(statement, (ast.Import, ast.ImportFrom)):
            if any((alias.asname or alias.name) == ENTRY_FUNCTION for alias in statement.names):
                return True
            continue
        for child in ast.iter_child_nodes(statement):
            if isinstance(child, ast.stmt):
                pending.append(child)
            elif isinstance(child, ast.excepthandler):
                pending.extend(child.body)
            elif isinstance(child, ast.expr) and any(
                isinstance(node, ast.Name) and node.id == ENTRY_FUNCTION and isinstance(node.ctx, ast.Store)
                for node in ast.walk(child)
            ):
                return True
    return False


def _trim(source: str, tree: ast.Module) -> str:
    """`source` without the top-level statements after the last `def f` that are not definitions or imports."""
    body = tree.body
    entry_index = next(
        (
            index
            for index in range(len(body) - 1, -1, -1)
            if isinstance(body[index], (ast.FunctionDef, ast.AsyncFunctionDef))
            and getattr(body[index], "name", None) == ENTRY_FUNCTION
        ),
        None,
    )
    if entry_index is None:
        return source
    tail = body[entry_index + 1 :]
    if all(isinstance(statement, _KEPT_AFTER_ENTRY) for statement in tail):
        return source
    lines = source.split("\n")
    last_line = body[entry_index].end_lineno or body[entry_index].lineno
    kept = lines[:last_line]
    for statement in tail:
        if not isinstance(statement, _KEPT_AFTER_ENTRY):
            continue
        decorators = getattr(statement, "decorator_list", [])
        start = max(min([statement.lineno] + [decorator.lineno for decorator in decorators]), last_line + 1)
        end = statement.end_lineno or statement.lineno
        if end >= start:
            kept += ["", *lines[start - 1 : end]]
            last_line = end
    return "\n".join(kept)


def _normalise_newlines(source: str) -> str:
    return source.replace("\r\n", "\n").replace("\r", "\n")


def trim_after_entry_function(source: str) -> str:
    """Apply the "anything after will be removed" rule (module docstring) to a program.

    Returns `source` itself when nothing is removed (also when it does not parse); else the trimmed program, with
    newlines normalised to "\n" (ast counts a lone "\r" as a line break too).
    """
    normalised = _normalise_newlines(source)
    tree = _try_parse(normalised)
    if tree is None:
        return source
    trimmed = _trim(normalised, tree)
    return source if trimmed == normalised else trimmed


def _imports(tree: ast.Module) -> tuple[tuple[str, ...], tuple[str, ...]]:
    nodes = sorted(
        (node for node in ast.walk(tree) if isinstance(node, (ast.Import, ast.ImportFrom))),
        key=lambda node: (node.lineno, node.col_offset),
    )
    modules: list[str] = []
    for node in nodes:
        if isinstance(node, ast.Import):
            modules.extend(alias.name for alias in node.names)
        else:
            modules.append("." * node.level + (node.module or ""))
    statements = (ast.unparse(node) for node in nodes)
    return tuple(dict.fromkeys(modules)), tuple(dict.fromkeys(statements))


def parse_program(source: str) -> ParsedProgram | ParseFailed:
    """Normalise newlines, check the entry function, trim after `def f`, and collect imports; never executes."""
    source = _normalise_newlines(source)
    tree = _try_parse(source)
    if tree is None:
        return ParsedProgram(source, syntax_ok=False, imported_modules=None, import_statements=None, trimmed=False)
    if not binds_entry_function(tree):
        return ParseFailed(ParseFailure.NO_ENTRY_FUNCTION, f"the program binds no top-level {ENTRY_FUNCTION!r}")
    trimmed = False
    trimmed_source = _trim(source, tree)
    if trimmed_source != source:
        trimmed_tree = _try_parse(trimmed_source)
        if trimmed_tree is not None:  # always, since whole statements were removed; stay safe if not
            source, tree, trimmed = trimmed_source, trimmed_tree, True
    modules, statements = _imports(tree)
    return ParsedProgram(
        source, syntax_ok=True, imported_modules=modules, import_statements=statements, trimmed=trimmed
    )


# ---------------------------------------------------------------------------------------------- blocks


def _clean_code(content: str) -> str:
    """Block content as a program: newlines normalised, blank edge lines dropped, common indentation removed."""
    lines = _normalise_newlines(content).split("\n")
    first = next((index for index, line in enumerate(lines) if line.strip()), len(lines))
    last = next((index for index in range(len(lines) - 1, -1, -1) if lines[index].strip()), -1)
    return textwrap.dedent("\n".join(lines[first : last + 1])).rstrip()


def _values(blocks: Sequence[FencedBlock], tags: Collection[str]) -> list[str]:
    """Stripped contents of the non-empty blocks whose tag is in `tags`, in order."""
    return [value for block in blocks if block.tag in tags and (value := block.content.strip())]


def _programs(blocks: Sequence[FencedBlock]) -> list[str]:
    """Non-empty ```python blocks as programs; if there are none, non-empty untagged blocks."""
    programs = [code for block in blocks if block.tag in PYTHON_TAGS and (code := _clean_code(block.content))]
    return programs or [code for block in blocks if block.tag == "" and (code := _clean_code(block.content))]


def _answer_blocks(response: str) -> tuple[R1Response, tuple[FencedBlock, ...]] | ParseFailed:
    split = split_r1_response(response)
    if isinstance(split, ParseFailed):
        return split
    return split, find_fenced_blocks(split.answer)


# ---------------------------------------------------------------------------------------------- proposers (Figs 34-36)


def _parse_program_proposal(response: str, task_type: TaskType) -> ProgramProposal | ParseFailed:
    parsed = _answer_blocks(response)
    if isinstance(parsed, ParseFailed):
        return parsed
    _, blocks = parsed
    programs = _programs(blocks)
    if not programs:
        return ParseFailed(ParseFailure.MISSING_CODE_BLOCK, "no non-empty ```python block in the answer")
    inputs = _values(blocks, ("input",))
    if not inputs:
        return ParseFailed(ParseFailure.MISSING_INPUT_BLOCK, "no non-empty ```input block in the answer")
    program = parse_program(programs[0])
    if isinstance(program, ParseFailed):
        return program
    return ProgramProposal(task_type=task_type, program=program, input=inputs[0])


def parse_deduction_proposal(response: str) -> ProgramProposal | ParseFailed:
    """Fig 35: the first ```python block (the program) and the first ```input block of the answer."""
    return _parse_program_proposal(response, TaskType.DEDUCTION)


def parse_abduction_proposal(response: str) -> ProgramProposal | ParseFailed:
    """Fig 34: the first ```python block (the program) and the first ```input block of the answer."""
    return _parse_program_proposal(response, TaskType.ABDUCTION)


def parse_induction_proposal(response: str, num_inputs: int = DEFAULT_NUM_INPUTS) -> InductionProposal | ParseFailed:
    """Fig 36: the last `num_inputs` of at least that many ```input blocks, and the first ```message block.

    Raises ValueError only for `num_inputs < 1` (a configuration error, never because of the text).
    """
    if num_inputs < 1:
        raise ValueError(f"num_inputs must be at least 1, got {num_inputs}")
    parsed = _answer_blocks(response)
    if isinstance(parsed, ParseFailed):
        return parsed
    _, blocks = parsed
    inputs = _values(blocks, ("input",))
    if not inputs:
        return ParseFailed(ParseFailure.MISSING_INPUT_BLOCK, "no non-empty ```input block in the answer")
    if len(inputs) < num_inputs:
        return ParseFailed(ParseFailure.WRONG_INPUT_COUNT, f"{len(inputs)} ```input blocks, need {num_inputs}")
    messages = _values(blocks, ("message",))
    if not messages:
        return ParseFailed(ParseFailure.MISSING_MESSAGE, "no non-empty ```message block in the answer")
    return InductionProposal(inputs=tuple(inputs[-num_inputs:]), message=messages[0])


# ---------------------------------------------------------------------------------------------- solvers (Figs 37-39)


def _solver_value(response: str, tag: str, missing: ParseFailure) -> tuple[str, bool] | ParseFailed:
    """The last non-empty block tagged `tag`, else the whole answer if it has no fence; with whether it was fenced."""
    parsed = _answer_blocks(response)
    if isinstance(parsed, ParseFailed):
        return parsed
    split, blocks = parsed
    values = _values(blocks, (tag,))
    if values:
        return values[-1], True
    if blocks:
        return ParseFailed(missing, f"the answer has fenced blocks but no non-empty ```{tag} block")
    return split.answer, False


def parse_deduction_solution(response: str) -> DeductionSolution | ParseFailed:
    """Fig 38: the predicted output, from the last ```output block (or the whole fence-free answer)."""
    value = _solver_value(response, "output", ParseFailure.MISSING_OUTPUT_BLOCK)
    if isinstance(value, ParseFailed):
        return value
    return DeductionSolution(output=value[0], fenced=value[1])


def parse_abduction_solution(response: str) -> AbductionSolution | ParseFailed:
    """Fig 37: the proposed input, from the last ```input block (or the whole fence-free answer)."""
    value = _solver_value(response, "input", ParseFailure.MISSING_INPUT_BLOCK)
    if isinstance(value, ParseFailed):
        return value
    return AbductionSolution(input=value[0], fenced=value[1])


def parse_induction_solution(response: str) -> InductionSolution | ParseFailed:
    """Fig 39: the program of the last ```python block (or, failing that, the last untagged block)."""
    parsed = _answer_blocks(response)
    if isinstance(parsed, ParseFailed):
        return parsed
    programs = _programs(parsed[1])
    if not programs:
        return ParseFailed(ParseFailure.MISSING_CODE_BLOCK, "no non-empty ```python block in the answer")
    program = parse_program(programs[-1])
    if isinstance(program, ParseFailed):
        return program
    return InductionSolution(program=program)


def parse_response(
    task_type: TaskType, role: Role, response: str, *, num_inputs: int = DEFAULT_NUM_INPUTS
) -> ParseResult:
    """Dispatch to the parser of one of the six (task type x role) groups (plain strings work too)."""
    if role == Role.PROPOSE:
        if task_type == TaskType.DEDUCTION:
            return parse_deduction_proposal(response)
        if task_type == TaskType.ABDUCTION:
            return parse_abduction_proposal(response)
        if task_type == TaskType.INDUCTION:
            return parse_induction_proposal(response, num_inputs)
    elif role == Role.SOLVE:
        if task_type == TaskType.DEDUCTION:
            return parse_deduction_solution(response)
        if task_type == TaskType.ABDUCTION:
            return parse_abduction_solution(response)
        if task_type == TaskType.INDUCTION:
            return parse_induction_solution(response)
    raise ValueError(f"unknown task group: ({task_type!r}, {role!r})")
