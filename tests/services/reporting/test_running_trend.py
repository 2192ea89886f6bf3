"""The running trend line: pooled solver format-OK and reward over the first and the last window of steps."""

from __future__ import annotations

from services.reporting.running_trend import running_trend


def line(step: int, format_ok: float, reward: float) -> dict:
    out: dict = {"step": step}
    for task_type in ("deduction", "abduction", "induction"):
        out[f"format_ok/{task_type}/solve"] = format_ok
        out[f"reward/{task_type}/solve"] = reward
    return out


def test_nothing_until_two_windows_of_steps() -> None:
    assert running_trend([line(step, 0.5, 0.0) for step in range(1, 10)], window=5) is None


def test_the_first_and_the_last_windows_pooled_over_task_types() -> None:
    lines = [line(step, 0.0 if step <= 5 else 0.5, -1.0 if step <= 5 else -0.25) for step in range(12, 0, -1)]
    lines[-1]["format_ok/induction/solve"] = None  # an empty group is left out, not counted as 0
    text = running_trend(lines, window=5)
    assert text == ("trend, steps 1-5 -> 8-12: solver format-OK 0.00 -> 0.50, solver reward -1.00 -> -0.25 "
                    "(azr trend tests it)")
