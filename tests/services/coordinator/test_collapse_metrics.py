"""The step's collapse watch: medians, example copies, proposal shape, distinct answers, where a spread comes from."""

from __future__ import annotations

import pytest

from services.algorithm.task_types import Role, TaskType
from services.coordinator.collapse_metrics import collapse_metrics, spread_source
from services.records import Episode

COPY = "x</think> <answer>```output\n{'age': 20, 'city': 'New York'}\n```</answer>"
RIGHT = "long thinking here</think> <answer>```output\n[1, 2]\n```</answer>"


def episode(index: int, task_type: TaskType, role: Role, reward: float, text: str, tokens: int) -> Episode:
    return Episode(id=f"e{index}", run_id="r", step=1, task_type=task_type, role=role, prompt_ids=[1],
                   response_ids=list(range(tokens)), reward=reward, policy_version=0, text=text, format_ok=True)


def test_the_line_shows_copies_lengths_and_the_source_of_each_spread() -> None:
    episodes = [
        episode(0, TaskType.DEDUCTION, Role.SOLVE, -0.5, COPY, 10),
        episode(1, TaskType.DEDUCTION, Role.SOLVE, -0.5, COPY, 12),
        episode(2, TaskType.DEDUCTION, Role.SOLVE, 1.0, RIGHT, 40),
        episode(3, TaskType.ABDUCTION, Role.SOLVE, -0.5, "a</think> <answer>```input\n1\n```</answer>", 8),
        episode(4, TaskType.ABDUCTION, Role.SOLVE, -1.0, "no tags", 30),
        episode(5, TaskType.DEDUCTION, Role.PROPOSE, -1.0, "plan</think>\n```python\ndef f(x):\n    return x\n```", 50),
        episode(6, TaskType.DEDUCTION, Role.PROPOSE, -1.0, "plan only", 20),
    ]
    metrics = collapse_metrics(episodes, learnability_answers={TaskType.DEDUCTION: [["1", "1", "2", "3"], ["5"]]},
                               solve_answers={TaskType.DEDUCTION: [["1"], ["2"]]})
    assert metrics["response_tokens_median/deduction/solve"] == 12
    assert metrics["example_copy/deduction/solve"] == pytest.approx(2 / 3, abs=1e-6)
    assert metrics["think_chars_median/deduction/solve"] == 1
    assert metrics["has_program/deduction/propose"] == 0.5
    assert metrics["has_input/deduction/propose"] == 0.0
    assert metrics["spread/deduction/solve"] == "correct"
    assert metrics["spread/abduction/solve"] == "format"
    assert metrics["spread/deduction/propose"] == "none"
    assert metrics["groups_with_correct_spread"] == 1
    assert metrics["distinct_answers/deduction/learnability"] == 0.75  # the group of one says nothing
    assert "distinct_answers/deduction/solve" not in metrics  # one answer per task: no group to compare


@pytest.mark.parametrize(("role", "rewards", "source"), [
    (Role.SOLVE, [1.0, -0.5], "correct"), (Role.SOLVE, [-0.5, -1.0], "format"), (Role.SOLVE, [-1.0, -1.0], "none"),
    (Role.PROPOSE, [0.25, -1.0], "correct"), (Role.PROPOSE, [-0.5, -1.0], "format"),
    (Role.PROPOSE, [0.0, 0.0], "none"),
])
def test_spread_source(role: Role, rewards: list[float], source: str) -> None:
    assert spread_source(role, rewards) == source
