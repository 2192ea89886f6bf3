"""Tests for services/algorithm/response_format.py and parsing.py: exact parses of real-looking outputs, every failure
reason, and hypothesis properties (no public function raises on any text; well-formed responses round-trip)."""

from __future__ import annotations

import ast
import textwrap

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from services.algorithm.parsing import (
    AbductionSolution,
    DeductionSolution,
    InductionProposal,
    InductionSolution,
    ParsedProgram,
    ProgramProposal,
    parse_abduction_proposal,
    parse_abduction_solution,
    parse_deduction_proposal,
    parse_deduction_solution,
    parse_induction_proposal,
    parse_induction_solution,
    parse_program,
    parse_response,
    trim_after_entry_function,
)
from services.algorithm.response_format import (
    FencedBlock,
    ParseFailed,
    ParseFailure,
    R1Response,
    find_fenced_blocks,
    split_r1_response,
)
from services.algorithm.task_types import Role, TaskType

F = ParseFailure
FENCE = "```"
PAPER_INPUT = "'John',{'age': 20, 'city': 'New York'}"  # Figs 34-37 example input


def respond(answer: str, thinking: str = "Let me think step by step.") -> str:
    """A base model's completion: it starts inside <think> because the prompt ends with "Assistant: <think>"."""
    return f" {thinking}\n</think>\n<answer>\n{answer}\n</answer>"


def block(tag: str, content: str) -> str:
    return f"{FENCE}{tag}\n{content}\n{FENCE}"


def program(source: str, *, modules: tuple[str, ...] = (), statements: tuple[str, ...] = (), trimmed: bool = False):
    return ParsedProgram(source, True, modules, statements, trimmed)


IDENTITY = "def f(x):\n    return x"
BFS = textwrap.dedent(
    """\
    from collections import deque

    def f(grid: list, start: tuple):
        seen, queue = {start}, deque([start])
        while queue:
            r, c = queue.popleft()
            for dr, dc in ((0, 1), (1, 0)):
                nxt = (r + dr, c + dc)
                if nxt[0] < len(grid) and nxt[1] < len(grid[0]) and grid[nxt[0]][nxt[1]] == 0 and nxt not in seen:
                    seen.add(nxt)
                    queue.append(nxt)
        return len(seen)"""
)

# ----------------------------------------------------------------------------------------------- R1 format (Fig 33)


@pytest.mark.parametrize(
    ("response", "expected"),
    [
        # base model: starts inside the think block
        (" I reason.\n</think>\n<answer>\n42\n</answer>", R1Response("I reason.", "42", False)),
        # instruct model: writes <think> itself; whitespace around everything is fine
        ("\n<think>\nI reason.</think>   <answer>42</answer>\n\n", R1Response("I reason.", "42", True)),
        ("</think><answer>x</answer>", R1Response("", "x", False)),  # empty thinking is allowed
        ("t</think><answer>x</answer><|im_end|>", R1Response("t", "x", False)),  # EOS marker kept by the decoder
        ("t</think><answer>x</answer>\n<|endoftext|></s>  ", R1Response("t", "x", False)),
        ("a < b > c</think><answer>1 < 2</answer>", R1Response("a < b > c", "1 < 2", False)),
    ],
)
def test_split_r1_accepts(response: str, expected: R1Response) -> None:
    assert split_r1_response(response) == expected


@pytest.mark.parametrize(
    ("response", "reason"),
    [
        ("", F.NO_THINK),
        ("I keep thinking and the max length cuts me off", F.NO_THINK),
        ("<answer>42</answer>", F.NO_THINK),
        ("<think>a</think><think>b</think><answer>1</answer>", F.MALFORMED_TAGS),  # two think blocks
        ("a<think>b</think><answer>1</answer>", F.MALFORMED_TAGS),  # nested / late <think>
        ("a</think></think><answer>1</answer>", F.MALFORMED_TAGS),
        ("I will write <answer> tags</think><answer>1</answer>", F.MALFORMED_TAGS),  # answer tag mentioned in think
        ("a</answer></think><answer>1</answer>", F.MALFORMED_TAGS),
        ("a</answer></think><answer>1", F.MALFORMED_TAGS),  # the only </answer> sits inside the think block
        ("a</think>", F.NO_ANSWER),
        ("a</think> the answer is 42", F.NO_ANSWER),
        ("a</think>so<answer>1</answer>", F.MALFORMED_TAGS),  # text between </think> and <answer>
        ("a</think><answer>1</answer><answer>2</answer>", F.MALFORMED_TAGS),
        ("a</think><answer>1</answer></answer>", F.MALFORMED_TAGS),
        ("a</think><answer><think>1</answer>", F.MALFORMED_TAGS),
        ("a</think></answer><answer>1", F.MALFORMED_TAGS),
        ("a</think><answer>1", F.UNCLOSED_ANSWER),
        ("a</think><answer>```python\ndef f(x):", F.UNCLOSED_ANSWER),
        ("a</think><answer>1</answer> Hope this helps!", F.TRAILING_TEXT),
        ("a</think><answer>1</answer><|im_end|>extra", F.TRAILING_TEXT),
        ("a</think><answer> \n\t </answer>", F.EMPTY_ANSWER),
        ("<THINK>a</THINK><ANSWER>1</ANSWER>", F.NO_THINK),  # tags are case-sensitive
    ],
)
def test_split_r1_rejects(response: str, reason: ParseFailure) -> None:
    result = split_r1_response(response)
    assert isinstance(result, ParseFailed)
    assert result.reason is reason


# ----------------------------------------------------------------------------------------------- fenced blocks


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("no fences", ()),
        ("```python\nx = 1\n```", (FencedBlock("python", "\nx = 1\n", True),)),
        (
            "```Python\na\n```\n```INPUT\nb\n```",
            (FencedBlock("python", "\na\n", True), FencedBlock("input", "\nb\n", True)),
        ),
        # a tagged fence closes the open block and opens its own
        ("```python\na\n```input\nb\n```", (FencedBlock("python", "\na\n", True), FencedBlock("input", "\nb\n", True))),
        # inline fences, as the paper's prompts write them
        ("wrap it in ```input``` tags", (FencedBlock("input", "", True),)),
        ("```input 'a', 1```", (FencedBlock("input", " 'a', 1", True),)),
        # a stray untagged fence before a tagged one does no harm
        (
            "I use ``` fences\n```output\n3\n```",
            (FencedBlock("", " fences\n", True), FencedBlock("output", "\n3\n", True)),
        ),
        # unclosed: runs to the end
        ("```output\n[1, 2]", (FencedBlock("output", "\n[1, 2]", False),)),
        ("````python\ny\n````", (FencedBlock("python", "\ny\n", True),)),  # longer fences
        ("```input_0\n1\n```", (FencedBlock("input_0", "\n1\n", True),)),
    ],
)
def test_find_fenced_blocks(text: str, expected: tuple[FencedBlock, ...]) -> None:
    assert find_fenced_blocks(text) == expected


# ----------------------------------------------------------------------------------------------- programs


@pytest.mark.parametrize(
    "source",
    [
        IDENTITY,
        "async def f(x):\n    return x",
        "class f:\n    def __init__(self, x):\n        self.x = x",
        "f = lambda x: x",
        "from operator import neg as f",
        "try:\n    def f(x):\n        return x\nexcept Exception:\n    pass",
        "if True:\n    f = abs",
        "try:\n    import fast\nexcept ImportError:\n    def f(x):\n        return x",
        "for f in (abs,):\n    pass",
    ],
)
def test_parse_program_accepts_every_top_level_binding_of_f(source: str) -> None:
    result = parse_program(source)
    assert isinstance(result, ParsedProgram)
    assert (result.source, result.syntax_ok, result.trimmed) == (source, True, False)


@pytest.mark.parametrize(
    "source",
    [
        "def g(x):\n    return x",
        "class A:\n    def f(self):\n        return 1",  # a method is not top level
        "def g():\n    def f():\n        return 1\n    return f",
        "# only a comment",
    ],
)
def test_parse_program_without_entry_function(source: str) -> None:
    assert parse_program(source) == ParseFailed(F.NO_ENTRY_FUNCTION, "the program binds no top-level 'f'")


def test_program_that_does_not_parse_is_passed_through_for_the_executor() -> None:
    source = "def f(x)\n    return x"  # missing colon: the executor's syntax_error, not a format error
    assert parse_program(source) == ParsedProgram(source, False, None, None, False)
    assert parse_program("def g(x) return") == ParsedProgram("def g(x) return", False, None, None, False)
    assert parse_program("def f(x):\n    return '\ud800'").syntax_ok is False  # lone surrogate
    assert parse_program("def f(x):\n    return x\x00").syntax_ok is False
    assert parse_program("def f(x):\n    return " + "1+" * 100_000 + "1").syntax_ok is False  # too deep for ast


def test_parse_program_collects_imports_in_source_order() -> None:
    source = textwrap.dedent(
        """\
        import numpy as np, os.path
        from collections import deque, Counter
        from . import sibling
        from ..pkg.mod import thing
        import numpy

        def f(x):
            import heapq
            from itertools import accumulate as acc
            return x"""
    )
    result = parse_program(source)
    assert isinstance(result, ParsedProgram)
    assert result.imported_modules == ("numpy", "os.path", "collections", ".", "..pkg.mod", "heapq", "itertools")
    assert result.import_statements == (
        "import numpy as np, os.path",
        "from collections import deque, Counter",
        "from . import sibling",
        "from ..pkg.mod import thing",
        "import numpy",
        "import heapq",
        "from itertools import accumulate as acc",
    )


def test_newlines_are_normalised() -> None:
    assert parse_program("def f(x):\r\n    return x\r\n") == program("def f(x):\n    return x\n")
    old_mac = "import os\rdef f(x):\r    return x\rprint(f(1))\rdef g():\r    return 2\r"
    expected = "import os\ndef f(x):\n    return x\n\ndef g():\n    return 2"
    assert trim_after_entry_function(old_mac) == expected
    assert parse_program(old_mac) == program(expected, modules=("os",), statements=("import os",), trimmed=True)
    assert trim_after_entry_function("def f(x):\r\n    return x\r\n") == "def f(x):\r\n    return x\r\n"


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        # test calls, prints, comments after f go
        (f"{IDENTITY}\n\n# Example usage\nprint(f(3))\nassert f(1) == 1\n", IDENTITY),
        (f"{IDENTITY}\n\nif __name__ == '__main__':\n    print(f('Hello'))\n", IDENTITY),
        (f"{IDENTITY}\nresult = f(2)\nfor i in range(3):\n    f(i)\n", IDENTITY),
        # everything before f stays, definitions and imports after f stay (f may call them)
        (
            f"import math\nLIMIT = 10\nprint('setup')\n\n{IDENTITY}\n\nx = f(1)\n\n@staticmethod\ndef helper():\n"
            "    return 1\nprint(x)\nclass Node:\n    pass\nimport heapq",
            f"import math\nLIMIT = 10\nprint('setup')\n\n{IDENTITY}\n\n@staticmethod\ndef helper():\n    return 1\n\n"
            "class Node:\n    pass\n\nimport heapq",
        ),
        # the last def f is the anchor
        (f"def f(x):\n    return 1\nf(0)\n{IDENTITY}\nf(1)", f"def f(x):\n    return 1\nf(0)\n{IDENTITY}"),
        # whole lines: a removed statement sharing a line with a kept import stays
        (f"{IDENTITY}\nprint(1); import os\nf(1)", f"{IDENTITY}\n\nprint(1); import os"),
    ],
)
def test_anything_after_f_is_removed(source: str, expected: str) -> None:
    assert trim_after_entry_function(source) == expected
    result = parse_program(source)
    assert isinstance(result, ParsedProgram)
    assert (result.source, result.trimmed, result.syntax_ok) == (expected, True, True)


@pytest.mark.parametrize(
    "source",
    [
        IDENTITY,
        f"{IDENTITY}\n# trailing comment kept when no statement goes\n",
        f"{IDENTITY}\ndef g():\n    return 2",
        "f = lambda x: x\nprint(f(1))",  # no top-level def f: no anchor, nothing trimmed
        "def f(x)\n    return x\nprint(1)",  # does not parse: unchanged
    ],
)
def test_nothing_to_trim(source: str) -> None:
    assert trim_after_entry_function(source) == source


# ----------------------------------------------------------------------------------------------- proposers (Figs 34-36)

DEDUCTION_PROPOSAL = (
    " I need a snippet that tracks state over a grid walk. A BFS over open cells works.\n</think>\n<answer>\n"
    f"{block('python', BFS)}\n\n{block('input', '[[0, 0, 1], [1, 0, 0], [0, 0, 0]], (0, 0)')}\n</answer>"
)


def test_deduction_proposal_real_output() -> None:
    assert parse_deduction_proposal(DEDUCTION_PROPOSAL) == ProgramProposal(
        TaskType.DEDUCTION,
        program(BFS, modules=("collections",), statements=("from collections import deque",)),
        "[[0, 0, 1], [1, 0, 0], [0, 0, 0]], (0, 0)",
    )


def test_abduction_proposal_paper_example_format() -> None:
    code = "def f(name: str, info: dict):\n    return name + ' is ' + str(info['age'])"
    # Fig 34 writes the code indented under a list item; the first block of each kind wins
    answer = (
        f"Here is my snippet:\n```python\n    {code.replace(chr(10), chr(10) + '    ')}\n    print(f('A', {{}}))\n```\n"
        f"```input\n{PAPER_INPUT}\n```\n```input\n'Sammy', {{'age': 37}}\n```\n```python\ndef f(): return 0\n```"
    )
    result = parse_abduction_proposal(respond(answer))
    assert result == ProgramProposal(TaskType.ABDUCTION, program(code, trimmed=True), PAPER_INPUT)


def test_proposal_untagged_code_block_and_unclosed_input() -> None:
    result = parse_deduction_proposal(respond(f"{FENCE}\n{IDENTITY}\n{FENCE}\n{FENCE}input\n'Hello World'"))
    assert result == ProgramProposal(TaskType.DEDUCTION, program(IDENTITY), "'Hello World'")


def test_proposal_with_syntax_error_is_not_a_parse_failure() -> None:
    result = parse_abduction_proposal(respond(block("python", "def f(x)\n    return x") + block("input", "1")))
    unparsed = ParsedProgram("def f(x)\n    return x", False, None, None, False)
    assert result == ProgramProposal(TaskType.ABDUCTION, unparsed, "1")


@pytest.mark.parametrize("parse", [parse_deduction_proposal, parse_abduction_proposal])
@pytest.mark.parametrize(
    ("response", "reason"),
    [
        ("I will write a snippet that", F.NO_THINK),
        ("plan</think>", F.NO_ANSWER),
        (f"plan</think><answer>{block('python', IDENTITY)}", F.UNCLOSED_ANSWER),
        (respond(block("python", IDENTITY) + block("input", "1")) + "\nDone!", F.TRAILING_TEXT),
        (respond(block("python", IDENTITY)) + respond(block("input", "1")), F.MALFORMED_TAGS),
        (respond(" "), F.EMPTY_ANSWER),
        (respond(block("input", PAPER_INPUT)), F.MISSING_CODE_BLOCK),
        (respond(f"def f(x):\n    return x\n{block('input', '1')}"), F.MISSING_CODE_BLOCK),  # code not fenced
        (respond(block("python", "") + block("input", "1")), F.MISSING_CODE_BLOCK),  # empty block ignored
        (respond(block("python", IDENTITY)), F.MISSING_INPUT_BLOCK),
        (respond(block("python", IDENTITY) + "\nInput: 'a'"), F.MISSING_INPUT_BLOCK),
        (respond(block("python", IDENTITY) + block("input", "  ")), F.MISSING_INPUT_BLOCK),
        (respond(block("python", "def g(x):\n    return x") + block("input", "1")), F.NO_ENTRY_FUNCTION),
    ],
)
def test_program_proposal_failures(parse, response: str, reason: ParseFailure) -> None:  # noqa: ANN001
    result = parse(response)
    assert isinstance(result, ParseFailed)
    assert result.reason is reason


INPUTS = [f"'{name}', {{'age': {age}}}" for name, age in zip("ABCDEFGHIJKL", range(20, 32), strict=True)]


def test_induction_proposal_real_output() -> None:
    answer = "\n".join(block("input", value) for value in INPUTS[:10])
    answer += "\n" + block("message", "The function greets a person; look at how age changes the greeting.")
    assert parse_induction_proposal(respond(answer)) == InductionProposal(
        tuple(INPUTS[:10]), "The function greets a person; look at how age changes the greeting."
    )


def test_induction_proposal_keeps_last_n_and_first_message() -> None:
    answer = (
        block("message", "first") + "".join(block("input", value) for value in INPUTS) + block("message", "second")
    )
    assert parse_induction_proposal(respond(answer)) == InductionProposal(tuple(INPUTS[2:]), "first")
    assert parse_induction_proposal(respond(answer), num_inputs=3) == InductionProposal(tuple(INPUTS[-3:]), "first")


@pytest.mark.parametrize(
    ("answer", "reason"),
    [
        (block("message", "hint"), F.MISSING_INPUT_BLOCK),
        ("".join(block("input", value) for value in INPUTS[:9]) + block("message", "m"), F.WRONG_INPUT_COUNT),
        # empty blocks and numbered tags do not count
        (
            "".join(block("input", v) for v in INPUTS[:9]) + block("input", "") + block("message", "m"),
            F.WRONG_INPUT_COUNT,
        ),
        ("".join(block(f"input_{i}", v) for i, v in enumerate(INPUTS)) + block("message", "m"), F.MISSING_INPUT_BLOCK),
        ("".join(block("input", value) for value in INPUTS[:10]), F.MISSING_MESSAGE),
        ("".join(block("input", v) for v in INPUTS[:10]) + "<message>hint</message>", F.MISSING_MESSAGE),
        ("".join(block("input", v) for v in INPUTS[:10]) + block("message", "\n"), F.MISSING_MESSAGE),
    ],
)
def test_induction_proposal_failures(answer: str, reason: ParseFailure) -> None:
    result = parse_induction_proposal(respond(answer))
    assert isinstance(result, ParseFailed)
    assert result.reason is reason


def test_induction_proposal_counts_in_detail_and_rejects_bad_config() -> None:
    answer = "".join(block("input", value) for value in INPUTS[:4]) + block("message", "m")
    assert parse_induction_proposal(respond(answer), num_inputs=5) == ParseFailed(
        F.WRONG_INPUT_COUNT, "4 ```input blocks, need 5"
    )
    with pytest.raises(ValueError):
        parse_induction_proposal(respond(answer), num_inputs=0)


# ----------------------------------------------------------------------------------------------- solvers (Figs 37-39)


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        (
            block("output", "{'age': 20, 'city': 'New York'}"),  # Fig 38's example output
            DeductionSolution("{'age': 20, 'city': 'New York'}", True),
        ),
        ("'Hello World'", DeductionSolution("'Hello World'", False)),  # no fence at all: the whole answer
        ("\n  (1, 'a')  \n", DeductionSolution("(1, 'a')", False)),
        # restated input first, the last output block wins
        (
            block("input", "[1, 2]") + "draft:" + block("output", "3") + "final:" + block("output", "4"),
            DeductionSolution("4", True),
        ),
        ("The output is:\n```output\n[1, 2, 3]", DeductionSolution("[1, 2, 3]", True)),  # unclosed fence
        ("```Output\n\"multi\nline\"\n```", DeductionSolution('"multi\nline"', True)),
    ],
)
def test_deduction_solution(answer: str, expected: DeductionSolution) -> None:
    assert parse_deduction_solution(respond(answer)) == expected


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        (block("input", PAPER_INPUT), AbductionSolution(PAPER_INPUT, True)),
        (PAPER_INPUT, AbductionSolution(PAPER_INPUT, False)),
        (
            block("output", "'Hello'") + block("input", "'x'") + block("input", "'Hello'"),
            AbductionSolution("'Hello'", True),
        ),
        ("```input\n[1,\n 2]\n```", AbductionSolution("[1,\n 2]", True)),  # multi-line inputs are kept
    ],
)
def test_abduction_solution(answer: str, expected: AbductionSolution) -> None:
    assert parse_abduction_solution(respond(answer)) == expected


@pytest.mark.parametrize(
    ("parse", "answer", "reason"),
    [
        (parse_deduction_solution, block("python", IDENTITY), F.MISSING_OUTPUT_BLOCK),
        (parse_deduction_solution, block("input", "1"), F.MISSING_OUTPUT_BLOCK),
        (parse_deduction_solution, "Put it in ```output``` tags", F.MISSING_OUTPUT_BLOCK),  # only an empty block
        (parse_abduction_solution, block("output", "'Hello'"), F.MISSING_INPUT_BLOCK),
        (parse_abduction_solution, block("", "'Hello'"), F.MISSING_INPUT_BLOCK),
    ],
)
def test_value_solution_failures(parse, answer: str, reason: ParseFailure) -> None:  # noqa: ANN001
    result = parse(respond(answer))
    assert isinstance(result, ParseFailed)
    assert result.reason is reason


@pytest.mark.parametrize("parse", [parse_deduction_solution, parse_abduction_solution, parse_induction_solution])
@pytest.mark.parametrize(
    ("response", "reason"),
    [
        ("the answer is 3", F.NO_THINK),
        ("hm</think>3", F.NO_ANSWER),
        ("hm</think><answer>3", F.UNCLOSED_ANSWER),
        ("hm</think><answer>3</answer> or 4", F.TRAILING_TEXT),
        ("hm</think><answer></answer>", F.EMPTY_ANSWER),
        ("hm</think><answer>3</answer><answer>4</answer>", F.MALFORMED_TAGS),
    ],
)
def test_solver_format_failures(parse, response: str, reason: ParseFailure) -> None:  # noqa: ANN001
    result = parse(response)
    assert isinstance(result, ParseFailed)
    assert result.reason is reason


def test_induction_solution_takes_last_python_block_and_trims() -> None:
    answer = (
        "Pairs 0-2 suggest doubling:\n" + block("python", "def f(a):\n    return a * 2")
        + "\nBut pair 3 says otherwise, so:\n" + block("python", "def f(a):\n    return a * 2 + 1\n\nprint(f(3))")
    )
    assert parse_induction_solution(respond(answer)) == InductionSolution(
        program("def f(a):\n    return a * 2 + 1", trimmed=True)
    )


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        (block("", IDENTITY), InductionSolution(program(IDENTITY))),  # untagged fallback
        (
            block("python", "def f(a)\n    return a"),
            InductionSolution(ParsedProgram("def f(a)\n    return a", False, None, None, False)),
        ),
        (
            block("python", "def g(a):\n    return a"),
            ParseFailed(F.NO_ENTRY_FUNCTION, "the program binds no top-level 'f'"),
        ),
        (block("input", "1"), ParseFailed(F.MISSING_CODE_BLOCK, "no non-empty ```python block in the answer")),
        (IDENTITY, ParseFailed(F.MISSING_CODE_BLOCK, "no non-empty ```python block in the answer")),
    ],
)
def test_induction_solution_cases(answer: str, expected: InductionSolution | ParseFailed) -> None:
    assert parse_induction_solution(respond(answer)) == expected


def test_parse_response_dispatches_all_six_groups() -> None:
    value = respond(block("python", IDENTITY) + block("input", "1") + block("output", "1") + block("message", "m"))
    expected = {
        (TaskType.DEDUCTION, Role.PROPOSE): ProgramProposal(TaskType.DEDUCTION, program(IDENTITY), "1"),
        (TaskType.ABDUCTION, Role.PROPOSE): ProgramProposal(TaskType.ABDUCTION, program(IDENTITY), "1"),
        (TaskType.INDUCTION, Role.PROPOSE): InductionProposal(("1",), "m"),
        (TaskType.DEDUCTION, Role.SOLVE): DeductionSolution("1", True),
        (TaskType.ABDUCTION, Role.SOLVE): AbductionSolution("1", True),
        (TaskType.INDUCTION, Role.SOLVE): InductionSolution(program(IDENTITY)),
    }
    for (task_type, role), result in expected.items():
        assert parse_response(task_type, role, value, num_inputs=1) == result
        assert parse_response(str(task_type), str(role), value, num_inputs=1) == result  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        parse_response("translation", Role.SOLVE, value)  # type: ignore[arg-type]


# ----------------------------------------------------------------------------------------------- properties

TOKENS = [
    "<think>", "</think>", "<answer>", "</answer>", "```", "```python", "```input", "```output", "```message",
    "```py", "````", "\n", " ", "\x00", "def f(x):\n    return x\n", "print(f(1))\n", "'John', {'age': 20}", "é漢🙂",
    "<|im_end|>", "\r\n", "```Input", "f = 1\n", "(((((", "\ud800",
]
ALL_PARSERS = [
    split_r1_response, find_fenced_blocks, parse_program, trim_after_entry_function, parse_deduction_proposal,
    parse_abduction_proposal, parse_induction_proposal, parse_deduction_solution, parse_abduction_solution,
    parse_induction_solution,
]
RESULT_TYPES = {
    split_r1_response: (R1Response, ParseFailed),
    find_fenced_blocks: (tuple,),
    parse_program: (ParsedProgram, ParseFailed),
    trim_after_entry_function: (str,),
    parse_deduction_proposal: (ProgramProposal, ParseFailed),
    parse_abduction_proposal: (ProgramProposal, ParseFailed),
    parse_induction_proposal: (InductionProposal, ParseFailed),
    parse_deduction_solution: (DeductionSolution, ParseFailed),
    parse_abduction_solution: (AbductionSolution, ParseFailed),
    parse_induction_solution: (InductionSolution, ParseFailed),
}
token_soup = st.lists(st.sampled_from(TOKENS) | st.text(max_size=5), max_size=40).map("".join)
clean_text = st.text(alphabet=st.characters(exclude_characters="<`", exclude_categories=("Cs",)), max_size=60)
clean_value = clean_text.filter(lambda text: text.strip() != "")


def _check_all(text: str) -> None:
    for parse in ALL_PARSERS:
        result = parse(text)
        assert isinstance(result, RESULT_TYPES[parse]), (parse.__name__, result)
    for num_inputs in (1, 2, 10):
        assert isinstance(parse_induction_proposal(text, num_inputs), (InductionProposal, ParseFailed))


@settings(max_examples=150, deadline=None)
@given(st.text())
def test_no_parser_raises_on_random_text(text: str) -> None:
    _check_all(text)


@settings(max_examples=250, deadline=None)
@given(token_soup)
def test_no_parser_raises_on_token_soup(text: str) -> None:
    _check_all(text)
    _check_all(f"</think><answer>{text}</answer>")  # and with the soup as the answer


@pytest.mark.parametrize(
    "text",
    [
        "```" * 10_000,
        "```python\n" * 10_000,
        "</think><answer>" + "```input\n1\n" * 10_000 + "</answer>",
        "<think>" * 5_000 + "</think>" * 5_000 + "<answer>" * 5_000,
        "</think><answer>" + "x" * 1_000_000 + "</answer>",
        "</think><answer>```python\ndef f(x):\n    return " + "(" * 5_000 + "</answer>",
        "</think><answer>```python\n" + "if x:\n" + " " * 200 + "pass\n" + "</answer>",
        "</think><answer>```python\n" + "".join(" " * i + "if x:\n" for i in range(150)) + "</answer>",
        "</think><answer>```python\ndef f(x):\n    return " + "[" * 150 + "]" * 150 + "\n```</answer>",
        "<think><think></think></think><answer><answer></answer></answer>",
        "\x00" * 1000 + "</think>\x00<answer>\x00</answer>\x00",
    ],
)
def test_adversarial_inputs(text: str) -> None:
    _check_all(text)


@settings(max_examples=100, deadline=None)
@given(thinking=clean_text, answer=clean_value, explicit=st.booleans(), pad=st.sampled_from(["", " ", "\n\n", "\t"]))
def test_well_formed_r1_round_trips(thinking: str, answer: str, explicit: bool, pad: str) -> None:
    response = f"{pad}{'<think>' if explicit else ''}{thinking}</think>{pad}<answer>{answer}</answer>{pad}"
    assert split_r1_response(response) == R1Response(thinking.strip(), answer.strip(), explicit)


@settings(max_examples=100, deadline=None)
@given(token_soup)
def test_a_successful_split_saw_each_tag_once_in_order(text: str) -> None:
    result = split_r1_response(text)
    if isinstance(result, R1Response):
        assert text.count("</think>") == text.count("<answer>") == text.count("</answer>") == 1
        assert text.count("<think>") <= 1
        assert text.index("</think>") < text.index("<answer>") < text.index("</answer>")
        assert result.answer and result.answer in text


@settings(max_examples=100, deadline=None)
@given(token_soup)
def test_fenced_block_contents_come_from_the_text(text: str) -> None:
    blocks = find_fenced_blocks(text)
    assert len(blocks) <= text.count("```")
    assert all(block.content in text and block.tag == block.tag.lower() for block in blocks)
    assert all(block.closed for block in blocks[:-1])


@settings(max_examples=100, deadline=None)
@given(value=clean_value, fenced=st.booleans(), draft=clean_value)
def test_solver_values_round_trip(value: str, fenced: bool, draft: str) -> None:
    answer = f"{block('output', draft)}\n{block('output', value)}" if fenced else value
    assert parse_deduction_solution(respond(answer)) == DeductionSolution(value.strip(), fenced)
    answer = f"{block('input', draft)}\n{block('input', value)}" if fenced else value
    assert parse_abduction_solution(respond(answer)) == AbductionSolution(value.strip(), fenced)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(inputs=st.lists(clean_value, min_size=1, max_size=12), message=clean_value, num_inputs=st.integers(1, 12))
def test_induction_proposals_round_trip(inputs: list[str], message: str, num_inputs: int) -> None:
    answer = "\n".join(block("input", value) for value in inputs) + "\n" + block("message", message)
    result = parse_induction_proposal(respond(answer), num_inputs)
    if len(inputs) >= num_inputs:
        assert result == InductionProposal(tuple(value.strip() for value in inputs[-num_inputs:]), message.strip())
    else:
        assert result == ParseFailed(F.WRONG_INPUT_COUNT, f"{len(inputs)} ```input blocks, need {num_inputs}")


@settings(max_examples=60, deadline=None)
@given(value=clean_value)
def test_program_proposals_round_trip(value: str) -> None:
    response = respond(block("python", BFS) + block("input", value))
    expected = program(BFS, modules=("collections",), statements=("from collections import deque",))
    assert parse_deduction_proposal(response) == ProgramProposal(TaskType.DEDUCTION, expected, value.strip())


STATEMENTS = [
    "import math", "from itertools import chain", "X = 3", "print('hi')", "assert True", "def g(y):\n    return y + 1",
    "class Box:\n    size = 2", "# a comment", "", "for i in range(2):\n    pass",
    "if __name__ == '__main__':\n    print(1)",
    "@property\ndef h(self):\n    return 0", "x = 1; import sys",
]
KEPT = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Import, ast.ImportFrom)


@settings(max_examples=100, deadline=None)
@given(
    before=st.lists(st.sampled_from(STATEMENTS), max_size=5),
    after=st.lists(st.sampled_from(STATEMENTS), max_size=6),
)
def test_trimming_keeps_a_valid_program_with_only_definitions_after_f(before: list[str], after: list[str]) -> None:
    source = "\n".join([*before, "def f(a):\n    return g(a) if a else a", *after])
    result = parse_program(source)
    assert isinstance(result, ParsedProgram) and result.syntax_ok
    body = ast.parse(result.source).body
    entry = max(index for index, node in enumerate(body) if isinstance(node, ast.FunctionDef) and node.name == "f")
    dropped = [node for node in body[entry + 1 :] if not isinstance(node, KEPT)]
    shared_line = "x = 1; import sys" in after  # the documented whole-line exception
    assert dropped == [] or (shared_line and all(isinstance(node, ast.Assign) for node in dropped))
    assert result.source.startswith("\n".join([*before, "def f(a):\n    return g(a) if a else a"]))
    assert trim_after_entry_function(result.source) == result.source  # idempotent
    assert result.trimmed == (result.source != source)
