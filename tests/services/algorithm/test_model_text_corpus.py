"""Real model text, read as the authors' reward code reads it: every committed response of the default model
(tests/data/model_text/qwen-coder-0.5b.jsonl, sampled by sample_corpus.py at T = 1.0 with at most 1,024 new tokens:
at least 8 per task type x role, 16 for the deduction solver)
keeps the reading written down for it, and agrees with a second reading written straight from the authors' rules.

Each row's `expected` (format verdict, deciding failure, extraction, the reward the text decides) was reviewed
against docs/reading-rules.md when the corpus was committed: by hand for a sample of every (kind, failure) class,
and for all rows, plus mutated variants of them, against the authors' own reward functions run locally (0
disagreements); `authors_rules.py` is our independent transcription of those rules, so the agreement is re-checked
on every run. A change to the reading rules that moves any verdict fails here.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import authors_rules as authors
import pytest

from services.algorithm.parsing import (
    InductionProposal,
    ProgramProposal,
    learnability_answer,
    read_response,
)
from services.algorithm.task_types import Role, TaskType
from services.reporting.response_reading import KINDS, parse_kind, reading_row

CORPUS_DIR = Path(__file__).resolve().parents[2] / "data" / "model_text"
DEFAULT_CORPUS = CORPUS_DIR / "qwen-coder-0.5b.jsonl"
CORPORA = sorted(CORPUS_DIR.glob("*.jsonl"))
PINNED = ("format_ok", "extractable", "failure", "format_failure", "extraction_failure", "reward", "answer",
          "extracted")

MUTATIONS = (  # edits real responses the way models vary: where the two readings could part
    lambda t: t + "\n</answer> and then some text",
    lambda t: t.replace("</think>", "</think>\n\n", 1),
    lambda t: t.replace("<answer>", "<answer>\n```input\n1\n```\n", 1),
    lambda t: t[: len(t) // 2],
    lambda t: t.replace("```", "``` ", 1),
    lambda t: t.replace("<answer>", "<ANSWER>"),
    lambda t: "'" + t + '"',
    lambda t: t + "<answer>the output is 'x'.</answer>",
    lambda t: t.replace("def f(", "def helper(") + "\n",
    lambda t: t.replace("</answer>", "# Input: 5\n</answer>"),
    lambda t: t.replace("```input", "```message\nhi\n```\n```input", 1),
    lambda t: t + "\nAssistant: <answer>```python\ndef f(x): return x\n```</answer>",
)


def rows_of(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def ours(task_type: TaskType, role: Role, text: str) -> tuple[bool, str, object]:
    reading = read_response(task_type, role, text)
    value: object = reading.solver_answer
    if isinstance(reading.extracted, ProgramProposal):
        value = (reading.extracted.program, reading.extracted.input)
    elif isinstance(reading.extracted, InductionProposal):
        value = (reading.extracted.inputs, reading.extracted.message)
    return reading.format_ok, reading.generation.answer, value


def theirs(task_type: TaskType, role: Role, text: str) -> tuple[bool, str, object]:
    generation = authors.generation_of(text)
    answer = authors.answer_of(generation)
    if role is Role.PROPOSE:
        value = authors.induction_proposal(answer) if task_type is TaskType.INDUCTION else \
            authors.program_proposal(answer)
    elif task_type is TaskType.INDUCTION:
        value = authors.induction_solution(answer)
    else:
        value = authors.solver_value(answer, "output" if task_type is TaskType.DEDUCTION else "input")
    return authors.format_ok(generation), answer, value


def learnability_theirs(task_type: TaskType, text: str) -> str | None:
    """The authors read a learnability sample from the decoded response alone (no split, no quote strip)."""
    answer = authors.answer_of(text)
    if task_type is TaskType.INDUCTION:
        return authors.induction_solution(answer)
    return authors.solver_value(answer, "output" if task_type is TaskType.DEDUCTION else "input")


def test_the_default_model_corpus_has_8_responses_of_every_kind() -> None:
    rows = rows_of(DEFAULT_CORPUS)
    counts = Counter(row["kind"] for row in rows)
    assert set(counts) == set(KINDS) and min(counts.values()) >= 8, counts
    assert all(row["model"] == "qwen-coder-0.5b" and row["text"] for row in rows)
    assert all(row["max_new_tokens"] == 1024 and row["finish_reason"] in ("stop", "length") for row in rows)


@pytest.mark.parametrize("path", CORPORA, ids=[path.stem for path in CORPORA])
def test_every_reading_is_the_one_written_down(path: Path) -> None:
    mismatches = []
    for number, row in enumerate(rows_of(path), start=1):
        task_type, role = parse_kind(row["kind"])
        got = reading_row(read_response(task_type, role, row["text"]))
        expected = row["expected"]
        differing = {key: (expected[key], got[key]) for key in PINNED if expected[key] != got[key]}
        if differing:
            mismatches.append((number, row["kind"], differing))
    assert not mismatches, mismatches[:5]


@pytest.mark.parametrize("path", CORPORA, ids=[path.stem for path in CORPORA])
def test_every_response_and_its_variants_read_as_the_authors_rules_read_them(path: Path) -> None:
    disagreements = []
    compared = 0
    for number, row in enumerate(rows_of(path), start=1):
        task_type, role = parse_kind(row["kind"])
        for variant, text in enumerate([row["text"]] + [mutate(row["text"]) for mutate in MUTATIONS]):
            compared += 1
            if ours(task_type, role, text) != theirs(task_type, role, text):
                disagreements.append((number, row["kind"], variant))
            if role is Role.SOLVE and learnability_answer(task_type, text) != learnability_theirs(task_type, text):
                disagreements.append((number, row["kind"], variant, "learnability"))
    assert compared >= len(MUTATIONS) + 1 and not disagreements, disagreements[:10]


def test_the_corpus_exercises_both_verdicts_and_every_kind_of_failure_it_meets() -> None:
    """The corpus is real text, not a fit: it holds malformed responses of every kind, well-formed ones of both roles
    (the default model wrote no well-formed abduction proposal among its 8), and the failure classes the default
    model actually produces most (so each rule above meets real text)."""
    rows = rows_of(DEFAULT_CORPUS)
    malformed = Counter(row["kind"] for row in rows if not row["expected"]["format_ok"])
    well_formed = Counter(parse_kind(row["kind"])[1] for row in rows if row["expected"]["format_ok"])
    assert set(malformed) == set(KINDS), malformed
    assert well_formed[Role.PROPOSE] and well_formed[Role.SOLVE], well_formed
    failures = Counter(row["expected"]["failure"] for row in rows)
    assert {"no_think", "no_answer", "missing_code_block", "missing_input_block", None} <= set(failures), failures
