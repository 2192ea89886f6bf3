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


def test_the_line_says_how_many_episodes_carried_signal_and_whether_the_policy_moved() -> None:
    skipped = summarise({"step": 3, "train/signal_episodes": 0, "train/episodes": 12, "train/optimizer_steps": 0})
    assert "signal 0/12 episodes, no update" in skipped
    stepped = summarise({"step": 4, "train/signal_episodes": 4, "train/episodes": 12, "train/optimizer_steps": 1})
    assert "signal 4/12 episodes, update" in stepped and "no update" not in stepped
    assert "signal" not in summarise({"step": 1})  # the distributed coordinator has no in-process update
