"""Reading metrics.jsonl into series: gaps for None/absent/non-numeric values, skipped malformed lines, step order."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from services.reporting.run_metrics import MetricsFileError, load_run_metrics, numeric_or_nan, parse_metrics_text


def parse(*raw_lines: str):
    return parse_metrics_text("\n".join(raw_lines) + "\n", Path("metrics.jsonl"))


def same(values: list[float], expected: list[float | None]) -> bool:
    """Equal element-wise, with None in `expected` meaning NaN (a gap)."""
    return len(values) == len(expected) and all(
        math.isnan(v) if e is None else v == pytest.approx(e) for v, e in zip(values, expected))


def test_none_and_absent_values_become_gaps_at_their_steps() -> None:
    run = parse(json.dumps({"step": 1, "reward/deduction/solve": -0.5, "valid_rate/deduction": 0.25}),
                json.dumps({"step": 2, "reward/deduction/solve": None}),
                json.dumps({"step": 3, "reward/deduction/solve": 0.75, "valid_rate/deduction": 1.0}))
    assert run.steps == [1, 2, 3] and run.skipped == []
    reward = run.series("reward/deduction/solve")
    assert reward.steps == [1, 2, 3]
    assert same(reward.values, [-0.5, None, 0.75])
    assert same(run.series("valid_rate/deduction").values, [0.25, None, 1.0])
    assert reward.has_data and run.has_values("valid_rate/deduction")
    never = run.series("eval/cruxeval_o")
    assert same(never.values, [None, None, None]) and not never.has_data
    assert not run.has_values("eval/cruxeval_o")


def test_present_keeps_only_the_steps_with_values() -> None:
    run = parse(*(json.dumps({"step": s, **({"eval/cruxeval_o": s / 10} if s % 2 else {})}) for s in range(1, 6)))
    present = run.series("eval/cruxeval_o").present()
    assert present.steps == [1, 3, 5]
    assert present.values == pytest.approx([0.1, 0.3, 0.5])


def test_a_truncated_last_line_is_skipped_and_reported() -> None:
    good = [json.dumps({"step": step, "reward/abduction/propose": step / 10}) for step in (1, 2)]
    truncated = json.dumps({"step": 3, "reward/abduction/propose": 0.3})[:17]
    run = parse(*good, truncated)
    assert run.steps == [1, 2]
    assert [skipped.line_number for skipped in run.skipped] == [3]
    assert "not valid JSON" in run.skipped[0].reason
    assert run.series("reward/abduction/propose").values == pytest.approx([0.1, 0.2])


def test_lines_that_are_not_step_objects_are_skipped_with_reasons() -> None:
    run = parse(json.dumps([1, 2]), json.dumps({"policy_version": 0}), json.dumps({"step": "4"}),
                json.dumps({"step": True}), "", json.dumps({"step": 5, "buffer/induction": 9}))
    assert run.steps == [5]
    reasons = {skipped.line_number: skipped.reason for skipped in run.skipped}
    assert set(reasons) == {1, 2, 3, 4}  # the blank line 5 is neither used nor reported
    assert "not an object" in reasons[1]
    assert all("integer `step`" in reasons[number] for number in (2, 3, 4))


def test_lines_are_ordered_by_step_and_a_repeated_step_keeps_its_last_line() -> None:
    run = parse(json.dumps({"step": 3, "buffer/deduction": 30}), json.dumps({"step": 1, "buffer/deduction": 10}),
                json.dumps({"step": 3, "buffer/deduction": 33}), json.dumps({"step": 2, "buffer/deduction": 20}))
    assert run.steps == [1, 2, 3]
    assert run.series("buffer/deduction").values == [10.0, 20.0, 33.0]


@pytest.mark.parametrize("value", [None, True, False, "0.5", float("inf"), float("nan"), [1], {"a": 1}])
def test_non_numeric_or_non_finite_values_are_gaps(value: object) -> None:
    assert math.isnan(numeric_or_nan(value))


def test_numbers_are_kept_as_floats() -> None:
    assert numeric_or_nan(3) == 3.0 and numeric_or_nan(-0.25) == -0.25


def test_nan_and_infinity_written_by_json_dumps_are_read_as_gaps() -> None:
    run = parse(json.dumps({"step": 1, "train/loss": float("nan")}),
                json.dumps({"step": 2, "train/loss": float("inf")}), json.dumps({"step": 3, "train/loss": 0.5}))
    assert same(run.series("train/loss").values, [None, None, 0.5])


def test_task_types_come_from_per_type_keys_known_ones_first() -> None:
    run = parse(json.dumps({"step": 1, "reward/induction/solve": 0.0, "buffer/zeta": 1, "valid_rate/deduction": 0.5,
                            "task/abduction/answer_diversity": 1.0, "task/halstead_score": 0.2, "time/total": 3.0,
                            "train/loss": 0.1}),
                json.dumps({"step": 2, "response_tokens/alpha/propose": 10.0}))
    # `task/halstead_score` (over all types), `time/...` and `train/...` name no task type.
    assert run.task_types() == ["deduction", "abduction", "induction", "alpha", "zeta"]


def test_load_reads_the_run_directory(tmp_path: Path) -> None:
    (tmp_path / "metrics.jsonl").write_text(json.dumps({"step": 1, "buffer/deduction": 4}) + "\n" + '{"step": 2, "bu')
    run = load_run_metrics(tmp_path)
    assert run.path == tmp_path / "metrics.jsonl"
    assert run.steps == [1] and [s.line_number for s in run.skipped] == [2]


def test_load_refuses_a_run_without_usable_metrics(tmp_path: Path) -> None:
    with pytest.raises(MetricsFileError, match="not a directory"):
        load_run_metrics(tmp_path / "absent")
    with pytest.raises(MetricsFileError, match="not found"):
        load_run_metrics(tmp_path)
    (tmp_path / "metrics.jsonl").write_text("")
    with pytest.raises(MetricsFileError, match="no usable step line"):
        load_run_metrics(tmp_path)
    (tmp_path / "metrics.jsonl").write_text('{"step": 1, "rew\n')
    with pytest.raises(MetricsFileError, match=r"1 unreadable"):
        load_run_metrics(tmp_path)
