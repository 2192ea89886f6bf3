"""`azr trend`'s collapse warnings: lengths halved while right answers did not rise, and the prompt's example copied."""

from __future__ import annotations

from services.reporting.collapse_watch import collapse_rows, collapse_warnings


def line(step: int, length: float, solve_rate: float, copy: float = 0.0) -> dict:
    return {"step": step, "response_tokens_median/deduction/solve": length, "solve_rate/deduction": solve_rate,
            "example_copy/deduction/solve": copy, "groups_with_correct_spread": 1, "new/deduction": 2}


def test_shorter_answers_without_more_right_ones_are_flagged() -> None:
    lines = [line(s, 240, 0.1) for s in range(1, 6)] + [line(s, 30, 0.1, copy=0.8) for s in range(6, 11)]
    warnings = collapse_warnings(lines, window=5)
    assert any("deduction/solve: median response 240 -> 30 tokens" in w for w in warnings)
    assert any("80% of the last 5 steps' answers are the prompt's own example" in w for w in warnings)


def test_shorter_answers_that_got_right_are_not_flagged() -> None:
    lines = [line(s, 240, 0.1) for s in range(1, 6)] + [line(s, 100, 0.6) for s in range(6, 11)]
    assert collapse_warnings(lines, window=5) == []


def test_too_few_steps_say_nothing_about_lengths() -> None:
    assert collapse_warnings([line(1, 200, 0.0), line(2, 10, 0.0)], window=5) == []


def test_rows_read_each_step() -> None:
    row = collapse_rows([line(3, 120, 0.5, copy=0.25)])[0]
    assert (row.step, row.solver_lengths[0], row.example_copy, row.correct_spread, row.valid) == (3, 120.0, 0.25,
                                                                                                  1, 2)
    assert row.solver_lengths[1] is None and row.has_program is None
