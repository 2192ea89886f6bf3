"""The trend test of a run (services/reporting/trend_comparison.py, `azr trend`): permutation p-values, bootstrap
intervals, and the paired probe comparison, against values computed by hand."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from typer.testing import CliRunner

from azr.cli.main import app
from services.reporting.trend_comparison import (
    bootstrap_interval,
    compare_probe,
    permutation_p_value,
    series_values,
    sign_test,
    trend,
)


def test_exact_permutation_p_value_by_hand() -> None:
    # first = [0, 0], last = [1, 1]: of the C(4, 2) = 6 relabellings only one puts both 1s last
    assert permutation_p_value([0, 0], [1, 1]) == (pytest.approx(1 / 6), True)
    assert permutation_p_value([1, 1], [0, 0]) == (pytest.approx(1.0), True)  # a fall is no evidence of a rise
    p_tie, _ = permutation_p_value([1, 0], [0, 1])
    assert p_tie == pytest.approx(5 / 6)  # 5 of 6 relabellings reach a difference >= 0


def test_sampled_permutation_for_long_windows_is_close_to_exact() -> None:
    first, last = [0.0] * 10 + [1.0] * 2, [1.0] * 8 + [0.0] * 4
    p, exact = permutation_p_value(first, last, permutations=20_000)
    assert not exact and 0.0 < p < 0.05


def test_bootstrap_interval_brackets_the_difference() -> None:
    low, high = bootstrap_interval([0.1, 0.2, 0.15, 0.12], [0.5, 0.6, 0.55, 0.58])
    assert 0.2 < low < 0.4 < high < 0.5


def test_series_follow_the_step_order_and_skip_missing_values() -> None:
    lines = [{"step": 2, "k": 0.5}, {"step": 1, "k": 0.25}, {"step": 3, "k": None}, {"step": 4}]
    assert series_values(lines, "k") == [0.25, 0.5]
    assert trend(lines, "k", 2) is None


def test_sign_test_by_hand() -> None:
    assert sign_test(0, 0) == 1.0
    assert sign_test(3, 0) == pytest.approx(1 / 8)
    assert sign_test(4, 1) == pytest.approx((math.comb(5, 4) + 1) / 32)


def probe_rows(correct: list[bool], formatted: list[bool]) -> list[dict]:
    return [{"id": f"r{i}", "split": "output", "correct": c, "format_ok": f}
            for i, (c, f) in enumerate(zip(correct, formatted))]


def test_probe_comparison_pairs_rows() -> None:
    before = probe_rows([False, False, True, False], [False, True, True, True])
    after = probe_rows([True, True, False, False], [True, True, True, True])
    (c,) = compare_probe(before, after)
    assert (c.rows, c.correct_before, c.correct_after, c.fixed, c.broken) == (4, 1, 2, 2, 1)
    assert (c.format_ok_before, c.format_ok_after) == (3, 4)
    assert c.p_value == pytest.approx(sign_test(2, 1))
    with pytest.raises(ValueError):
        compare_probe(before, after[:3])


def test_the_command_prints_every_series_and_the_probe(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    lines = [{"step": s, "reward/deduction/solve": -1.0 if s <= 3 else -0.5, "format_ok/deduction/solve":
              0.0 if s <= 3 else 0.5} for s in range(1, 7)]
    (run / "metrics.jsonl").write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    before, after = tmp_path / "before.jsonl", tmp_path / "after.jsonl"
    before.write_text("\n".join(json.dumps(r) for r in probe_rows([False, True], [False, True])))
    after.write_text("\n".join(json.dumps(r) for r in probe_rows([True, True], [True, True])))
    result = CliRunner().invoke(app, ["trend", str(run), "--window", "3", "--probe", str(before), str(after)])
    assert result.exit_code == 0, result.output
    assert "reward/deduction/solve" in result.stdout and "+0.500" in result.stdout
    assert "p (one-sided)" in result.stdout and " 0.0500 (exact)" in result.stdout  # 1 / C(6, 3)
    assert "reward/induction/solve       fewer than 6 steps" in result.stdout
    assert "accuracy 1/2 -> 2/2, format OK 1 -> 2, fixed 1, broken 0" in result.stdout
