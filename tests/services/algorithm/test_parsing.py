"""Task and answer extraction (services/algorithm/parsing.py), rule by rule (docs/reading-rules.md §2).

Many cases are ones the authors' reward code accepts and our first parser refused (or read differently); each says
so. Real model text is pinned separately (test_model_text_corpus.py).
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from services.algorithm.parsing import (
    AbductionSolution,
    DeductionSolution,
    InductionProposal,
    InductionSolution,
    ParseFailed,
    ProgramProposal,
    extract,
    learnability_answer,
    read_response,
)
from services.algorithm.response_format import ParseFailure
from services.algorithm.task_types import Role, TaskType

F = ParseFailure
D, A, IND = TaskType.DEDUCTION, TaskType.ABDUCTION, TaskType.INDUCTION
P, S = Role.PROPOSE, Role.SOLVE
FENCE = "```"


def block(tag: str, content: str) -> str:
    return f"{FENCE}{tag}\n{content}\n{FENCE}"


def respond(answer: str) -> str:
    return f"Let me plan.\n</think>\n<answer>\n{answer}\n</answer>"


# ------------------------------------------------------------------------------------ deduction/abduction proposer


def test_program_and_input_are_the_first_blocks() -> None:
    answer = block("python", "def f(x):\n    return x + 1") + "\n" + block("input", " 41 ") + "\n" + block("input", "9")
    result = extract(D, P, answer)
    assert result == ProgramProposal(D, "def f(x):\n    return x + 1", "41")


def test_an_untagged_block_is_code_and_the_python_tag_is_any_case() -> None:
    assert isinstance(extract(A, P, block("", "def f(s): return s") + block("input", "'a'")), ProgramProposal)
    result = extract(A, P, block("Python", "def f(s): return s") + block("input", "'a'"))
    assert isinstance(result, ProgramProposal) and result.program == "def f(s): return s"


def test_another_tag_is_not_skipped_so_an_input_block_first_is_taken_for_the_code() -> None:
    answer = block("input", "5") + "\n" + block("python", "def f(x):\n    return x")
    result = extract(D, P, answer)
    assert isinstance(result, ParseFailed) and result.reason is F.NO_FUNCTION_DEF


def test_a_py_tag_stays_in_the_program_as_the_authors_read_it() -> None:
    """The code regex knows only `python`: "```py" leaves "py" as the program's first line (a NameError later)."""
    result = extract(D, P, block("py", "def f(x):\n    return x") + block("input", "1"))
    assert isinstance(result, ProgramProposal) and result.program == "py\ndef f(x):\n    return x"


def test_the_input_may_come_from_an_input_line() -> None:
    """Accepted now, refused before (missing_input_block): the `# Input:` fallback."""
    result = extract(D, P, block("python", "def f(x):\n    return x * 2") + "\n# Input: 21")
    assert isinstance(result, ProgramProposal) and result.input == "21"


def test_a_single_function_is_renamed_to_f_with_its_calls() -> None:
    """Accepted now, refused before (no_entry_function)."""
    code = "def fact(n):\n    return 1 if n < 2 else n * fact(n - 1)"
    result = extract(D, P, block("python", code) + block("input", "5"))
    assert isinstance(result, ProgramProposal)
    assert result.program == "def f(n):\n    return 1 if n < 2 else n * f(n - 1)"
    assert result.renamed_from == "fact"


@pytest.mark.parametrize("code", [
    "def f(x):\n    def helper(y):\n        return y\n    return helper(x)",  # a nested def counts
    "class Stack:\n    def push(self, v):\n        pass\ndef f(x):\n    return x",  # so does a method
])
def test_more_than_one_def_is_refused_by_default(code: str) -> None:
    result = extract(D, P, block("python", code) + block("input", "1"))
    assert isinstance(result, ParseFailed) and result.reason is F.MULTIPLE_FUNCTIONS
    allowed = extract(D, P, block("python", code) + block("input", "1"), reject_multiple_functions=False)
    assert isinstance(allowed, ProgramProposal)


def test_with_several_defs_allowed_the_first_is_renamed() -> None:
    code = "def helper(y):\n    return y\ndef main(x):\n    return helper(x)"
    result = extract(D, P, block("python", code) + block("input", "1"), reject_multiple_functions=False)
    assert isinstance(result, ProgramProposal)
    assert result.program == "def f(y):\n    return y\ndef main(x):\n    return f(x)"


def test_a_program_is_stored_as_written_after_its_def() -> None:
    """Changed: statements after `def f` used to be trimmed; self-play programs are now unaltered (§3.3.1)."""
    code = "def f(x):\n    return x\n\nprint(f(3))"
    result = extract(D, P, block("python", code) + block("input", "3"))
    assert isinstance(result, ProgramProposal) and result.program == code


@pytest.mark.parametrize(("answer", "reason"), [
    ("no blocks here", F.MISSING_CODE_BLOCK),
    (block("python", "def f(x): return x"), F.MISSING_INPUT_BLOCK),
    (block("python", "x = 1") + block("input", "1"), F.NO_FUNCTION_DEF),
    (block("python", "class f:\n    pass") + block("input", "1"), F.NO_FUNCTION_DEF),
])
def test_proposer_extraction_failures(answer: str, reason: ParseFailure) -> None:
    result = extract(D, P, answer)
    assert isinstance(result, ParseFailed) and result.reason is reason


# ------------------------------------------------------------------------------------------ induction proposer


def inputs(count: int, start: int = 0) -> str:
    return "\n".join(block("input", str(start + k)) for k in range(count))


def test_the_last_n_inputs_and_the_first_message() -> None:
    answer = block("input", "'example'") + inputs(10) + block("message", " first ") + block("message", "second")
    result = extract(IND, P, answer, num_inputs=10)
    assert result == InductionProposal(tuple(str(k) for k in range(10)), "first")


@pytest.mark.parametrize(("message", "text"), [
    ("<message>  a hint  </message>", "a hint"),  # accepted now, refused before (missing_message)
    ("# Message: sort it", "sort it"),  # accepted now, refused before
])
def test_message_fallbacks(message: str, text: str) -> None:
    result = extract(IND, P, inputs(10) + "\n" + message, num_inputs=10)
    assert isinstance(result, InductionProposal) and result.message == text


def test_empty_input_blocks_count_like_the_authors() -> None:
    result = extract(IND, P, inputs(9) + block("input", "") + block("message", "m"), num_inputs=10)
    assert isinstance(result, InductionProposal) and result.inputs[-1] == ""


@pytest.mark.parametrize(("answer", "reason"), [
    (block("message", "m"), F.MISSING_INPUT_BLOCK),
    (inputs(9) + block("message", "m"), F.WRONG_INPUT_COUNT),
    (inputs(10), F.MISSING_MESSAGE),
])
def test_induction_proposer_failures(answer: str, reason: ParseFailure) -> None:
    result = extract(IND, P, answer, num_inputs=10)
    assert isinstance(result, ParseFailed) and result.reason is reason


# ------------------------------------------------------------------------------------------------- solvers


@pytest.mark.parametrize(("answer", "value", "rule"), [
    (block("output", "1") + " then " + block("output", "'x' "), "'x' ", "block"),  # last block, not stripped
    ("# Output: [1, 2]", "[1, 2]", "line"),  # read before as the whole answer, "# Output: [1, 2]"
    ("The call gives output([3])", "[3]", "call"),
    ("<output> {'a': 1} </output>", "{'a': 1} ", "tag"),
    ("So the output is 'abc'.", "'abc'", "phrase"),
    ("(1, 2)", "(1, 2)", "whole"),
])
def test_the_deduction_answer_chain(answer: str, value: str, rule: str) -> None:
    result = extract(D, S, answer)
    assert result == DeductionSolution(value, rule)


def test_a_mislabelled_block_no_longer_makes_a_format_error() -> None:
    """Refused before (missing_output_block); the authors take the whole answer text."""
    result = read_response(D, S, respond(block("python", "5")))
    assert result.format_ok and result.failure is None
    assert isinstance(result.extracted, DeductionSolution) and result.extracted.rule == "whole"


def test_the_abduction_answer_chain() -> None:
    assert extract(A, S, block("input", "'a', 1") + block("input", "2")) == AbductionSolution("2", "block")
    assert extract(A, S, "calling input('hello') works") == AbductionSolution("'hello'", "call")
    assert extract(A, S, "f('hello')") == AbductionSolution("f('hello')", "whole")  # no rule: the whole text
    assert extract(A, S, "the input is [1, 2].") == AbductionSolution("[1, 2]", "phrase")


def test_the_call_rule_matches_any_word_ending_in_input() -> None:
    """`input\\s*\\((.*?)\\)`: the authors' rule also matches inside `parse_input(...)`, lazily up to the first `)`."""
    assert extract(A, S, "use parse_input(3, 4) here") == AbductionSolution("3, 4", "call")


def test_the_induction_answer_is_the_last_block_of_any_tag() -> None:
    answer = block("python", "def f(x):\n    return x") + "\n" + block("python", "def f(x):\n    return 2 * x")
    assert extract(IND, S, answer) == InductionSolution("def f(x):\n    return 2 * x")
    assert extract(IND, S, block("python", "def f(x): return x") + block("output", "4")) == InductionSolution(
        "output\n4")  # the last fence pair wins, whatever its tag
    result = extract(IND, S, "def f(x): return x")
    assert isinstance(result, ParseFailed) and result.reason is F.MISSING_CODE_BLOCK


# ------------------------------------------------------------------------------------------------- readings


def test_a_task_is_extracted_even_when_the_format_fails() -> None:
    """Buffer admission by validity alone: a proposal with a format error still yields its task."""
    response = "plan</think>\n" + block("python", "def f(x):\n    return x") + block("input", "1") + "\n</answer>"
    reading = read_response(D, P, response)
    assert reading.generation.format_failure is F.NO_ANSWER
    assert reading.extracted is None  # no <answer> open tag: the answer text is empty...
    response = "plan</think> oops <answer>" + block("python", "def f(x):\n    return x") + block("input", "1")
    reading = read_response(D, P, response + "</answer>")
    assert not reading.format_ok and isinstance(reading.extracted, ProgramProposal)  # ...here it is not
    assert reading.failure is F.MALFORMED_TAGS


def test_the_deciding_failure_depends_on_the_role() -> None:
    unformatted = "thinking forever <answer>no code"
    proposer = read_response(D, P, unformatted)
    assert proposer.failure is F.MISSING_CODE_BLOCK  # nothing to validate comes first
    solver = read_response(IND, S, unformatted)
    assert solver.failure is F.NO_THINK  # a solver's format error comes first


def test_learnability_answers_ignore_the_format() -> None:
    assert learnability_answer(D, "no think tags <answer>```output\n3\n```") == "3"
    assert learnability_answer(A, "nothing at all") == ""
    assert learnability_answer(IND, "<answer>no block</answer>") is None


def test_num_inputs_must_be_positive() -> None:
    with pytest.raises(ValueError):
        extract(IND, P, "", num_inputs=0)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(list("abf()x:# \n'`") + ["```", "```python\n", "```input\n", "def f(",
                                                       "<message>", "</message>", "```message\n"]),
                max_size=30).map("".join),
       st.sampled_from(list(TaskType)), st.sampled_from(list(Role)))
def test_extraction_never_raises(answer: str, task_type: TaskType, role: Role) -> None:
    result = extract(task_type, role, answer)
    if role is Role.SOLVE and task_type is not TaskType.INDUCTION:
        assert not isinstance(result, ParseFailed)  # the solver chain always yields an answer


@pytest.mark.parametrize(("task_type", "answer", "expected"), [
    (TaskType.DEDUCTION, "```output\n[1, 2]\n```", "[1, 2]"),
    (TaskType.ABDUCTION, "```input\n'abc', 3\n```", "'abc', 3"),
    (TaskType.INDUCTION, "```python\ndef f(x):\n    return x\n```", "def f(x):\n    return x"),
])
def test_a_solver_reading_names_its_answer_and_a_proposer_reading_none(task_type: TaskType, answer: str,
                                                                       expected: str) -> None:
    text = f"<think>plan</think><answer>{answer}</answer>"
    assert read_response(task_type, Role.SOLVE, text).solver_answer == expected
    assert read_response(task_type, Role.PROPOSE, text).solver_answer is None
