"""The per-step metrics of a step's episodes: reward mean and spread, format-OK share, length and count per group;
a group whose rewards are all equal has spread 0 (no Eq 8 signal)."""

from __future__ import annotations

import pytest

from services.algorithm.task_types import Role, TaskType
from services.coordinator.step_metrics import episode_metrics
from services.records import Episode


def episode(index: int, task_type: TaskType, role: Role, reward: float, *, format_ok: bool | None,
            response_tokens: int) -> Episode:
    return Episode(id=f"e{index}", run_id="r", step=1, task_type=task_type, role=role, prompt_ids=[1, 2],
                   response_ids=list(range(response_tokens)), reward=reward, policy_version=0, format_ok=format_ok)


def test_each_group_gets_its_mean_spread_format_share_length_and_count() -> None:
    episodes = [
        episode(0, TaskType.DEDUCTION, Role.SOLVE, 1.0, format_ok=True, response_tokens=10),
        episode(1, TaskType.DEDUCTION, Role.SOLVE, -0.5, format_ok=True, response_tokens=20),
        episode(2, TaskType.DEDUCTION, Role.SOLVE, -1.0, format_ok=False, response_tokens=30),
        episode(3, TaskType.ABDUCTION, Role.PROPOSE, -1.0, format_ok=False, response_tokens=5),
        episode(4, TaskType.ABDUCTION, Role.PROPOSE, -1.0, format_ok=None, response_tokens=7),
    ]
    metrics = episode_metrics(episodes)
    assert metrics["episodes"] == 5
    assert metrics["reward/deduction/solve"] == pytest.approx(-1 / 6, abs=1e-6)
    # population std of (1, -0.5, -1): mean -1/6, squares 49/36 + 4/36 + 25/36 = 78/36, / 3
    assert metrics["reward_std/deduction/solve"] == pytest.approx((78 / 108) ** 0.5, abs=1e-6)
    assert metrics["format_ok/deduction/solve"] == pytest.approx(2 / 3, abs=1e-6)
    assert metrics["response_tokens/deduction/solve"] == 20
    assert metrics["count/deduction/solve"] == 3
    assert metrics["reward_std/abduction/propose"] == 0.0, "equal rewards: no signal"
    assert metrics["format_ok/abduction/propose"] == 0.0, "an unknown verdict (None) is not counted"
    assert "reward/induction/solve" not in metrics and "reward_std/induction/solve" not in metrics
