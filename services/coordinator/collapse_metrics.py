"""The step's collapse watch: per (task type, role), what the responses look like, not only what they earned.

Keys (services/coordinator/step_metrics.py lists the rest of the line):
- `response_tokens_median/<type>/<role>`, `think_chars_median/<type>/<role>`: median response length (tokens) and
  `<think>` block length (characters); a policy that learns a template gets shorter while right answers do not rise;
- `example_copy/<type>/<role>`: share of answers (proposers: inputs) equal to the prompt's own example;
- `has_program/<type>/propose`, `has_input/<type>/propose`: share of proposals holding a fenced program / an ```input
  block anywhere in the text;
- `distinct_answers/<type>/learnability`: mean over this step's learnability groups of distinct answers / samples;
  `distinct_answers/<type>/solve` the same over groups of solver samples of one task (`solve_samples_per_task` > 1);
- `spread/<type>/<role>`: where the group's reward spread comes from, `correct` (a right answer beside wrong ones,
  or a valid task's learnability beside others), `format` (rewards differ, none right: only the format or a partial
  credit differs) or `none` (no spread: no gradient from this group); `groups_with_correct_spread` counts the first.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from statistics import median

from services.algorithm.collapse_signals import copies_prompt_example, proposal_shape, think_chars
from services.algorithm.task_types import Role, TaskType
from services.json_types import JsonObject
from services.records import Episode


def _share(flags: Sequence[bool]) -> float | None:
    return round(sum(flags) / len(flags), 6) if flags else None


def spread_source(role: Role, rewards: Sequence[float]) -> str:
    """`correct`, `format` or `none` for one group's rewards (see the module docstring). A solver's right answer
    earns 1; a proposer's valid, well-formed task earns its learnability in [0, 1], anything else is negative."""
    if len(set(rewards)) < 2:
        return "none"
    if role is Role.SOLVE:
        return "correct" if any(r >= 1.0 for r in rewards) else "format"
    return "correct" if any(r >= 0.0 for r in rewards) else "format"


def collapse_metrics(episodes: Sequence[Episode], *, learnability_answers: Mapping[TaskType, Sequence[Sequence[str]]],
                     solve_answers: Mapping[TaskType, Sequence[Sequence[str]]]) -> JsonObject:
    """The module docstring's keys for one step. `learnability_answers` / `solve_answers`: per task type, the
    answers of each group of samples of one task (a group of one says nothing and is left out)."""
    groups: dict[tuple[TaskType, Role], list[Episode]] = {}
    for episode in episodes:
        groups.setdefault((episode.task_type, episode.role), []).append(episode)
    metrics: JsonObject = {}
    correct_spread = 0
    for (task_type, role), members in sorted(groups.items(), key=lambda item: (item[0][0].value, item[0][1].value)):
        key = f"{task_type.value}/{role.value}"
        texts = [e.text or "" for e in members]
        metrics[f"response_tokens_median/{key}"] = median(len(e.response_ids) for e in members)
        metrics[f"think_chars_median/{key}"] = median(think_chars(text) for text in texts)
        metrics[f"example_copy/{key}"] = _share([copies_prompt_example(task_type, role, t) for t in texts])
        if role is Role.PROPOSE:
            shapes = [proposal_shape(text) for text in texts]
            metrics[f"has_program/{key}"] = _share([s.has_program for s in shapes])
            metrics[f"has_input/{key}"] = _share([s.has_input for s in shapes])
        source = spread_source(role, [e.reward for e in members])
        metrics[f"spread/{key}"] = source
        correct_spread += source == "correct"
    metrics["groups_with_correct_spread"] = correct_spread
    for name, by_type in (("learnability", learnability_answers), ("solve", solve_answers)):
        for task_type, answer_groups in by_type.items():
            ratios = [len(set(group)) / len(group) for group in answer_groups if len(group) > 1]
            if ratios:
                metrics[f"distinct_answers/{task_type.value}/{name}"] = round(sum(ratios) / len(ratios), 6)
    return metrics
