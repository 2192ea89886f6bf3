"""The per-step diagnosis (services/reporting/run_diagnosis.py, `azr trend --per-step`): update diagnostics per
step, which groups carried signal (a reward spread above 0), counted per group, and the outcome counts."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from azr.cli.main import app
from services.reporting.run_diagnosis import diagnose, outcome_counts, signal_counts

LINES = [
    {"step": 2, "train/grad_norm": 0.5, "train/entropy": 0.3, "train/clip_fraction": 0.0, "train/approx_kl": 1e-4,
     "reward_std/deduction/solve": 0.0, "reward_std/abduction/solve": 0.75, "reward_std/deduction/propose": 0.0},
    {"step": 1, "train/grad_norm": 0.2, "reward_std/deduction/solve": 0.5, "reward_std/abduction/solve": 0.25,
     "reward_std/induction/propose": 0.5},
    {"no step": True},
]


def test_steps_in_order_with_signal_and_silent_groups_and_missing_values_as_none() -> None:
    first, second = diagnose(LINES)
    assert (first.step, second.step) == (1, 2)
    assert first.signal_groups == ["deduction/solve", "abduction/solve", "induction/propose"]
    assert first.silent_groups == [] and first.update["train/entropy"] is None
    assert second.signal_groups == ["abduction/solve"]
    assert second.silent_groups == ["deduction/solve", "deduction/propose"]
    assert second.update == {"train/grad_norm": 0.5, "train/entropy": 0.3, "train/clip_fraction": 0.0,
                             "train/approx_kl": 1e-4}
    counts = signal_counts([first, second])
    assert counts["abduction/solve"] == 2 and counts["deduction/solve"] == 1 and counts["induction/solve"] == 0
    assert list(counts)[:3] == ["deduction/solve", "abduction/solve", "induction/solve"]


def test_the_command_prints_a_row_per_step_and_the_counts(tmp_path: Path) -> None:
    path = tmp_path / "metrics.jsonl"
    path.write_text("\n".join(json.dumps(line) for line in LINES) + "\n")
    result = CliRunner().invoke(app, ["trend", str(path), "--window", "1", "--per-step"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    diagnosis, collapse = result.stdout.split("steps with signal")
    rows = [line for line in diagnosis.splitlines() if line.strip().startswith(("1 ", "2 "))]
    assert len(rows) == 2 and rows[0].rstrip().endswith("deduction/solve, abduction/solve, induction/propose")
    assert "0.5" in rows[1] and "0.0001" in rows[1] and rows[1].rstrip().endswith("abduction/solve")
    assert "steps with signal, of 2: deduction/solve 1, abduction/solve 2, induction/solve 0" in result.stdout
    collapse_steps = [line.split()[0] for line in collapse.splitlines() if line.strip()[:1].isdigit()]
    assert collapse_steps == ["1", "2"], "the collapse watch has one row per step, in step order"


OUTCOMES = [
    {"step": 3, "format_failures/induction/solve/missing_code_block": 2, "exec_status/deduction/solve/wrong_answer": 1},
    {"step": 1, "format_failures/induction/solve/missing_code_block": 1, "parse_failures/deduction/no_function": 1,
     "reward/deduction/solve": -1.0},
    {"step": 2, "exec_status/deduction/solve/wrong_answer": 2, "format_failures/induction/solve/missing_code_block": 0},
]


def test_outcome_counts_sum_each_key_over_all_first_and_last_steps_most_frequent_first() -> None:
    counts = {c.key: c for c in outcome_counts(OUTCOMES, window=1)}
    assert set(counts) == {"format_failures/induction/solve/missing_code_block",
                           "exec_status/deduction/solve/wrong_answer", "parse_failures/deduction/no_function"}
    fence = counts["format_failures/induction/solve/missing_code_block"]
    assert (fence.total, fence.first, fence.last) == (3, 1, 2)  # first = step 1, last = step 3, whatever the order
    wrong = counts["exec_status/deduction/solve/wrong_answer"]
    assert (wrong.total, wrong.first, wrong.last) == (3, 0, 1)
    ordered = [c.key for c in outcome_counts(OUTCOMES, window=1)]
    assert ordered[-1] == "parse_failures/deduction/no_function"  # 1 in all: after the two with 3


def test_the_command_prints_the_outcome_counts(tmp_path: Path) -> None:
    path = tmp_path / "metrics.jsonl"
    path.write_text("\n".join(json.dumps(line) for line in OUTCOMES) + "\n")
    result = CliRunner().invoke(app, ["trend", str(path), "--window", "1", "--per-step"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    row = next(line for line in result.stdout.splitlines() if line.startswith("format_failures/induction/solve/"))
    assert row.split()[1:] == ["3", "1", "2"]
