"""Tests for services/algorithm/prompts.py: every template is checked against the paper's own figure text (Figs 33-39).

The paper is a PDF extraction (`paper/absolute_zero_paper.txt` in the shared test data directory, AZR_SHARED_DIR):
`clean_paper_figure` removes its artefacts (mojibake, "↪ →" continuation markers, stray fences, the caption fence) and
`paper_mismatch` compares with all whitespace removed, because the extraction both lost and invented whitespace
("Output{NUM_INPUTS}Inputs", lost indentation). Any change of a word, symbol or placeholder still fails.
"""

from __future__ import annotations

import os
import re
import string
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from services.algorithm import prompt_texts, prompts
from services.algorithm.prompts import (
    INDUCTION_CALL_SITE,
    R1_SYSTEM_INSTRUCTION,
    ReferenceTriplet,
    abduction_proposer_prompt,
    deduction_proposer_prompt,
    format_forbidden_list,
    format_io_pairs,
    format_reference_block,
    induction_snippet,
    proposer_prompt,
    r1_chat_messages,
    render_r1_prompt,
    solver_prompt,
)
from services.algorithm.task_types import FORBIDDEN_MODULES, TaskType
from services.records import InductionTask, Triplet

REPO_ROOT = Path(__file__).resolve().parents[3]
SHARED_DIR = Path(os.environ.get("AZR_SHARED_DIR", REPO_ROOT.parent / "shared"))
PAPER_PATH = SHARED_DIR / "paper" / "absolute_zero_paper.txt"

UNFILLED_PLACEHOLDER = re.compile(r"\{[A-Z][A-Z_]*\}")
EXAMPLE_DICT = "{'age': 20, 'city': 'New York'}"

# ---------------------------------------------------------------------------------------------- paper extraction


def fix_mojibake(line: str) -> str:
    """Undo the extraction's UTF-8-read-as-Mac-Roman ("‚Ü™ ‚Üí" -> "↪ →", "‚Äô" -> "’"); other lines stay as is."""
    try:
        return line.encode("mac_roman").decode("utf-8")
    except (UnicodeEncodeError, UnicodeDecodeError):
        return line


def clean_paper_figure(raw: str) -> str:
    """A figure's text as the authors wrote it, up to whitespace: the same artefacts prompt_texts.py left out."""
    text = "\n".join(fix_mojibake(line) for line in raw.split("\n"))
    # Fences holding only continuation arrows: a listing's margin, extracted as a separate block.
    text = re.sub(r"^```[ \t]*\n(?:[ \t]*↪ →[ \t]*\n)+```[ \t]*\n?", "", text, flags=re.MULTILINE)
    # Inline continuation markers at the start of a wrapped line ("_↪_ →").
    text = re.sub(r"_?↪_? →", "", text)
    # A closing fence the extraction turned into a heading (Fig 38).
    text = re.sub(r"^#### ```[ \t]*$", "```", text, flags=re.MULTILINE)
    # The fence opening the figure caption ends every figure body.
    text = text.rstrip()
    assert text.endswith("\n```"), "figure body should end with the caption's opening fence"
    text = text[: -len("\n```")]
    # The paper prints the str.format escapes; the model sees single braces.
    return text.replace("{{", "{").replace("}}", "}")


def paper_figure(first_line: str, caption: str) -> str:
    """The cleaned body of a figure: from its first line up to the first following caption."""
    if not PAPER_PATH.is_file():
        pytest.fail(f"paper text not found at {PAPER_PATH} (set AZR_SHARED_DIR to the shared directory)")
    paper = PAPER_PATH.read_text(encoding="utf-8")
    start = paper.index(first_line)
    end = paper.index(caption, start)
    return clean_paper_figure(paper[start:end])


def without_whitespace(text: str) -> str:
    return "".join(text.split())


def paper_mismatch(rendered: str, figure: str) -> str | None:
    """None when the two texts agree whitespace aside, else where they first differ."""
    ours, theirs = without_whitespace(rendered), without_whitespace(figure)
    if ours == theirs:
        return None
    at = next((i for i, (a, b) in enumerate(zip(ours, theirs)) if a != b), min(len(ours), len(theirs)))
    window = slice(max(0, at - 40), at + 40)
    return f"first difference at {at}: ours {ours[window]!r} vs paper {theirs[window]!r}"


# ---------------------------------------------------------------------------------------------- sample tasks


def sample_references(count: int) -> list[ReferenceTriplet]:
    return [
        ReferenceTriplet(
            program=f"def f(values_{i}):\n    return sorted(values_{i})[:{i + 1}]",
            input=f"[{i}, 'reference_input_{i:02d}']",
            output=f"'reference_output_{i:02d}'",
        )
        for i in range(count)
    ]


def sample_induction_task(num_inputs: int) -> InductionTask:
    return InductionTask(
        program="def f(n):\n    return n * 3",
        inputs=[f"'pair_input_{i:03d}'" for i in range(num_inputs)],
        outputs=[f"'pair_output_{i:03d}'" for i in range(num_inputs)],
        message="Multiply by the number of sides of a triangle.",
    )


def replace_exactly(text: str, value: str, placeholder: str, times: int = 1) -> str:
    """Put the paper's placeholder back where the rendering put `value`, which must occur exactly `times` times."""
    assert text.count(value) == times, f"{value!r} appears {text.count(value)} times, expected {times}"
    return text.replace(value, placeholder)


PROGRAM = "def f(sentinel_arg):\n    return sentinel_arg[::-1]"
TRIPLET = ReferenceTriplet(program=PROGRAM, input="'sentinel_input'", output="'sentinel_output'")
SENTINEL_NUM_INPUTS = 4242  # "10" also occurs in the static text ("10 seconds"), so N gets a value that cannot


def static_r1() -> str:
    return render_r1_prompt("{TASK_INSTRUCTION}")


def static_code_proposer(task_type: TaskType) -> str:
    references = sample_references(6)
    rendered = proposer_prompt(task_type, references)
    rendered = replace_exactly(rendered, format_reference_block(references), "{CODE_REFERENCES_FROM_BUFFER}")
    return replace_exactly(rendered, format_forbidden_list(FORBIDDEN_MODULES), "{LIST_OF_FORBIDDEN_PACKAGES}")


def static_induction_proposer() -> str:
    rendered = proposer_prompt(TaskType.INDUCTION, [TRIPLET], num_inputs=SENTINEL_NUM_INPUTS)
    rendered = replace_exactly(rendered, induction_snippet(PROGRAM), "{SNIPPET_FROM_BUFFER}")
    return replace_exactly(rendered, str(SENTINEL_NUM_INPUTS), "{NUM_INPUTS}", times=3)


def static_abduction_solver() -> str:
    rendered = solver_prompt(TaskType.ABDUCTION, TRIPLET)
    rendered = replace_exactly(rendered, PROGRAM, "{SNIPPET}")
    return replace_exactly(rendered, TRIPLET.output, "{OUTPUT}")


def static_deduction_solver() -> str:
    rendered = solver_prompt(TaskType.DEDUCTION, TRIPLET)
    rendered = replace_exactly(rendered, PROGRAM, "{SNIPPET}")
    return replace_exactly(rendered, TRIPLET.input, "{INPUT}")


def static_induction_solver() -> str:
    task = sample_induction_task(10)
    rendered = solver_prompt(TaskType.INDUCTION, task)
    rendered = replace_exactly(rendered, format_io_pairs(task.given_pairs), "{INPUT_OUTPUT_PAIRS}")
    return replace_exactly(rendered, task.message, "{MESSAGE}")


# (figure, its first line in the paper, its caption, the rendering with the paper's placeholders put back)
FIGURES: list[tuple[str, str, str, Callable[[], str]]] = [
    ("fig33_r1", "A conversation between User and Assistant", "Figure33.", static_r1),
    (
        "fig34_abduction_proposer",
        "## Task: Create a Python Code Snippet",
        "Figure34.",
        lambda: static_code_proposer(TaskType.ABDUCTION),
    ),
    (
        "fig35_deduction_proposer",
        "## Task: Create a New Python Code Snippet",
        "Figure35.",
        lambda: static_code_proposer(TaskType.DEDUCTION),
    ),
    ("fig36_induction_proposer", "## Task: Output{NUM_INPUTS}Inputs", "Figure36.", static_induction_proposer),
    ("fig37_abduction_solver", "# Task: Provide One Possible Input", "Figure37.", static_abduction_solver),
    ("fig38_deduction_solver", "# Task: Deduce the Output of a Python", "Figure38.", static_deduction_solver),
    ("fig39_induction_solver", "# Task: Deduce the Function that Produced", "Figure39.", static_induction_solver),
]
FIGURE_IDS = [name for name, *_ in FIGURES]

# ---------------------------------------------------------------------------------------------- against the paper


@pytest.mark.parametrize(("name", "first_line", "caption", "render_static"), FIGURES, ids=FIGURE_IDS)
def test_rendered_prompt_equals_paper_figure(
    name: str, first_line: str, caption: str, render_static: Callable[[], str]
) -> None:
    figure = paper_figure(first_line, caption)
    assert paper_mismatch(render_static(), figure) is None, f"{name}: {paper_mismatch(render_static(), figure)}"


@pytest.mark.parametrize(("name", "first_line", "caption", "render_static"), FIGURES, ids=FIGURE_IDS)
def test_cleaned_figure_is_substantial_and_free_of_artefacts(
    name: str, first_line: str, caption: str, render_static: Callable[[], str]
) -> None:
    # Guards the comparison against vacuous success: a cleaner that ate the figure would match nothing useful.
    figure = paper_figure(first_line, caption)
    assert len(without_whitespace(figure)) > 300
    for artefact in ("↪", "→", "‚", "Figure3", "Absolute Zero: Reinforced", "{{", "}}", "####"):
        assert artefact not in figure, f"{name}: {artefact!r} left in the cleaned figure"


@pytest.mark.parametrize(
    ("original", "mutated"),
    [
        ("deterministic", "stochastic"),  # one changed word
        ("{CODE_REFERENCES_FROM_BUFFER}", ""),  # a dropped placeholder
        ("10 seconds", "20 seconds"),  # one changed number
    ],
)
def test_comparison_reports_a_mutated_prompt(original: str, mutated: str) -> None:
    figure = paper_figure("## Task: Create a New Python Code Snippet", "Figure35.")
    rendered = static_code_proposer(TaskType.DEDUCTION)
    assert paper_mismatch(rendered, figure) is None
    assert paper_mismatch(rendered.replace(original, mutated, 1), figure) is not None


# ---------------------------------------------------------------------------------------------- placeholders


@pytest.mark.parametrize("task_type", [TaskType.ABDUCTION, TaskType.DEDUCTION])
def test_k6_references_appear_in_order(task_type: TaskType) -> None:
    references = sample_references(6)
    rendered = proposer_prompt(task_type, references)
    block_start = rendered.index("### Reference Code Snippets:\n<snippet_0>\n```python\n")
    positions = []
    for index, reference in enumerate(references):
        expected = (
            f"<snippet_{index}>\n```python\n{reference.program}\n```\n```input\n{reference.input}\n```\n"
            f"```output\n{reference.output}\n```\n</snippet_{index}>"
        )
        assert rendered.count(expected) == 1
        positions.append(rendered.index(expected))
    assert block_start < positions[0] and positions == sorted(positions)
    assert rendered.endswith("</snippet_5>")


@pytest.mark.parametrize("task_type", [TaskType.ABDUCTION, TaskType.DEDUCTION])
def test_forbidden_list_appears_in_full(task_type: TaskType) -> None:
    rendered = proposer_prompt(task_type, sample_references(1))
    assert "even in comments: " + ", ".join(FORBIDDEN_MODULES) + "\n" in rendered
    assert len(FORBIDDEN_MODULES) == 15 and FORBIDDEN_MODULES[0] == "logging" and FORBIDDEN_MODULES[-1] == "os.environ"


def test_forbidden_list_can_be_configured() -> None:
    rendered = abduction_proposer_prompt(sample_references(1), forbidden=["alpha", "beta.gamma"])
    assert "even in comments: alpha, beta.gamma\n" in rendered
    assert "hashlib" not in rendered and "bcrypt" not in rendered


@pytest.mark.parametrize("num_inputs", [2, 7, 10])
def test_induction_solver_shows_exactly_the_first_half(num_inputs: int) -> None:
    task = sample_induction_task(num_inputs)
    rendered = solver_prompt(TaskType.INDUCTION, task)
    shown = num_inputs // 2
    for index in range(num_inputs):
        pair_input, pair_output = task.inputs[index], task.outputs[index]
        if index < shown:
            assert f"```input_{index}\n{pair_input}\n```\n```output_{index}\n{pair_output}\n```" in rendered
        else:
            assert pair_input not in rendered and pair_output not in rendered
            assert f"input_{index}\n" not in rendered
    assert task.program not in rendered  # the solver never sees the code
    assert f"```message\n{task.message}\n```" in rendered


def test_induction_proposer_shows_program_with_call_site() -> None:
    rendered = proposer_prompt(TaskType.INDUCTION, [TRIPLET])
    assert f"### Code Snippet:\n```python\n{PROGRAM}\n{INDUCTION_CALL_SITE}\n```" in rendered
    assert "## Task: Output 10 Inputs" in rendered and "Provide 10 valid inputs" in rendered
    assert TRIPLET.input not in rendered and TRIPLET.output not in rendered


CODE_PROPOSER_FIELDS = {"LIST_OF_FORBIDDEN_PACKAGES", "CODE_REFERENCES_FROM_BUFFER"}


@pytest.mark.parametrize(
    ("name", "template", "fields"),
    [
        ("r1", prompt_texts.R1_TEMPLATE, {"TASK_INSTRUCTION"}),
        ("fig34", prompt_texts.ABDUCTION_PROPOSER_TEMPLATE, CODE_PROPOSER_FIELDS),
        ("fig35", prompt_texts.DEDUCTION_PROPOSER_TEMPLATE, CODE_PROPOSER_FIELDS),
        ("fig36", prompt_texts.INDUCTION_PROPOSER_TEMPLATE, {"NUM_INPUTS", "SNIPPET_FROM_BUFFER"}),
        ("fig37", prompt_texts.ABDUCTION_SOLVER_TEMPLATE, {"SNIPPET", "OUTPUT"}),
        ("fig38", prompt_texts.DEDUCTION_SOLVER_TEMPLATE, {"SNIPPET", "INPUT"}),
        ("fig39", prompt_texts.INDUCTION_SOLVER_TEMPLATE, {"INPUT_OUTPUT_PAIRS", "MESSAGE"}),
    ],
)
def test_templates_have_exactly_the_paper_placeholders(name: str, template: str, fields: set[str]) -> None:
    found = {field for _, field, _, _ in string.Formatter().parse(template) if field is not None}
    assert found == fields, name


# Task text without anything that looks like a placeholder; braces and backticks are allowed.
task_text = st.text(min_size=1, max_size=60).filter(lambda text: not UNFILLED_PLACEHOLDER.search(text))


@settings(max_examples=60, deadline=None)
@given(program=task_text, given_input=task_text, output=task_text, message=task_text)
def test_rendering_never_leaves_a_placeholder(program: str, given_input: str, output: str, message: str) -> None:
    triplet = ReferenceTriplet(program=program, input=given_input, output=output)
    puzzle = InductionTask(program=program, inputs=[given_input, "1"], outputs=[output, "2"], message=message)
    rendered = [
        proposer_prompt(TaskType.ABDUCTION, [triplet] * 6),
        proposer_prompt(TaskType.DEDUCTION, [triplet] * 6),
        proposer_prompt(TaskType.INDUCTION, [triplet]),
        solver_prompt(TaskType.ABDUCTION, triplet),
        solver_prompt(TaskType.DEDUCTION, triplet),
        solver_prompt(TaskType.INDUCTION, puzzle),
    ]
    for prompt in rendered + [render_r1_prompt(p) for p in rendered]:
        assert not UNFILLED_PLACEHOLDER.search(prompt), prompt


def test_braces_in_task_text_are_kept_verbatim() -> None:
    # Values are substituted, never re-formatted: a program with braces and placeholder-like text survives intact.
    program = "def f(d):\n    return {k: '{x}' for k in d} or '{{SNIPPET}}'"
    assert f"```python\n{program}\n```" in solver_prompt(TaskType.DEDUCTION, ReferenceTriplet(program, "{1: 2}", "0"))


@pytest.mark.parametrize("name", FIGURE_IDS[1:])
def test_examples_show_single_braces(name: str) -> None:
    render_static = dict((figure_name, render) for figure_name, _, _, render in FIGURES)[name]
    rendered = render_static()
    if name != "fig39_induction_solver":  # Fig 39's example is a program, not a dict
        assert EXAMPLE_DICT in rendered
    assert "{{" not in rendered and "}}" not in rendered


# ---------------------------------------------------------------------------------------------- R1 (Fig 33)


def test_r1_prompt_wraps_the_instruction() -> None:
    rendered = render_r1_prompt("Solve this.")
    assert rendered.startswith("A conversation between User and Assistant.")
    assert rendered == R1_SYSTEM_INSTRUCTION + " User: \nSolve this.\nAssistant: <think>"
    assert rendered.endswith("Assistant: <think>")


def test_r1_chat_messages_split_system_and_user() -> None:
    assert r1_chat_messages("Solve this.") == [
        {"role": "system", "content": R1_SYSTEM_INSTRUCTION},
        {"role": "user", "content": "Solve this."},
    ]
    assert "User:" not in R1_SYSTEM_INSTRUCTION and "Assistant:" not in R1_SYSTEM_INSTRUCTION


# ---------------------------------------------------------------------------------------------- inputs and errors


def test_solver_prompts_leave_out_the_answer() -> None:
    deduction = solver_prompt(TaskType.DEDUCTION, TRIPLET)
    abduction = solver_prompt(TaskType.ABDUCTION, TRIPLET)
    assert TRIPLET.input in deduction and TRIPLET.output not in deduction
    assert TRIPLET.output in abduction and TRIPLET.input not in abduction


def test_buffer_records_are_accepted_directly() -> None:
    triplet = Triplet(buffer=TaskType.DEDUCTION, program=PROGRAM, input="'abc'", output="'cba'")
    assert "```input\n'abc'\n```" in solver_prompt(TaskType.DEDUCTION, triplet)
    assert "<snippet_0>" in deduction_proposer_prompt([triplet])
    assert PROGRAM in proposer_prompt(TaskType.INDUCTION, [triplet])


def test_wrong_shapes_are_rejected() -> None:
    with pytest.raises(ValueError, match="at least one reference"):
        proposer_prompt(TaskType.DEDUCTION, [])
    with pytest.raises(ValueError, match="exactly one program"):
        proposer_prompt(TaskType.INDUCTION, sample_references(2))
    with pytest.raises(ValueError, match="at least 2"):
        proposer_prompt(TaskType.INDUCTION, [TRIPLET], num_inputs=1)
    with pytest.raises(TypeError):
        solver_prompt(TaskType.INDUCTION, TRIPLET)
    with pytest.raises(TypeError):
        solver_prompt(TaskType.DEDUCTION, sample_induction_task(4))
    with pytest.raises(ValueError, match="at least one"):
        solver_prompt(TaskType.INDUCTION, sample_induction_task(1))


def test_every_public_function_names_its_figure() -> None:
    for name in prompts.__all__:
        member = getattr(prompts, name)
        if callable(member) and not isinstance(member, type):
            assert member.__doc__ and re.search(r"Figs? 3[3-9]", member.__doc__), name
