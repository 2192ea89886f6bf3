"""The one-line step summary of the progress display: rewards per task type and where the step's time went."""

from __future__ import annotations

from services.coordinator.loop import summarise


def test_the_summary_adds_the_in_process_update_to_the_rollout_time() -> None:
    line = {"step": 3, "valid_rate/deduction": 0.5, "reward/deduction/propose": -1.0, "reward/deduction/solve": 0.25,
            "time/total": 275.36, "time/training": 287.9}
    text = summarise(line)
    assert text.startswith("step 3 | ded: valid 0.50 r_prop -1.00 r_solve 0.25 | abd: valid - ")
    assert text.endswith("| 563.3s (rollout 275.4s, training 287.9s)")


def test_without_an_update_the_summary_shows_the_rollout_alone() -> None:
    assert summarise({"step": 1, "time/total": 2.5}).endswith("| ind: valid - r_prop - r_solve - | 2.5s")
