"""Episode factories for the trainer tests: real token ids of the tiny tokenizer, one episode per call."""

from __future__ import annotations

import itertools
from collections.abc import Sequence

from services.algorithm.task_types import TASK_GROUPS, Role, TaskType
from services.records import Episode

_ids = itertools.count()

PROGRAM_TEXTS = [
    "def f(x):\n    return x",
    "def f(a, b):\n    return sorted([x * b for x in a])[::-1]",
    "def f(s: str) -> str:\n    return ''.join(reversed(s))",
    "def f(nums):\n    return sum(n for n in nums if n % 2 == 0)",
]


def episode(prompt_ids: Sequence[int], response_ids: Sequence[int], reward: float, *,
            task_type: TaskType = TaskType.DEDUCTION, role: Role = Role.SOLVE, policy_version: int = 0,
            behaviour_logprobs: Sequence[float] | None = None, step: int = 0) -> Episode:
    """One Episode with a fresh unique id."""
    return Episode(id=f"ep-{next(_ids)}", run_id="test", step=step, task_type=task_type, role=role,
                   prompt_ids=list(prompt_ids), response_ids=list(response_ids), reward=reward,
                   policy_version=policy_version,
                   behaviour_logprobs=None if behaviour_logprobs is None else list(behaviour_logprobs))


def text_ids(tokenizer, text: str) -> list[int]:
    """Token ids of ``text`` (no special tokens)."""
    return list(tokenizer(text, add_special_tokens=False)["input_ids"])


def six_group_batch(tokenizer, per_group: int, *, policy_version: int = 0) -> list[Episode]:
    """``per_group`` episodes for each of the six groups, prompts/responses cut from real program text, rewards varied
    within each group."""
    out = []
    for g, (task_type, role) in enumerate(TASK_GROUPS):
        for k in range(per_group):
            prompt = text_ids(tokenizer, PROGRAM_TEXTS[(g + k) % len(PROGRAM_TEXTS)])[: 6 + (g + k) % 5]
            response = text_ids(tokenizer, PROGRAM_TEXTS[(g + 2 * k + 1) % len(PROGRAM_TEXTS)])[: 3 + (k * 3 + g) % 6]
            out.append(episode(prompt, response, reward=float((k + g) % 3) - 0.5, task_type=task_type, role=role,
                               policy_version=policy_version))
    return out


def rewarded_pair(tokenizer) -> tuple[Episode, Episode]:
    """(good, bad): two responses to one prompt, rewarded +1 and −0.5 (the update must raise one, lower the other)."""
    prompt = text_ids(tokenizer, "def f(x):\n    return x")
    good = episode(prompt, text_ids(tokenizer, "<answer>'Hello World'</answer>"), reward=1.0)
    bad = episode(prompt, text_ids(tokenizer, "sorted(reversed(s))"), reward=-0.5)
    return good, bad
