"""Per-step diagnosis of a run that does or does not learn: the update's health and which groups carried signal. Pure.

From each `metrics.jsonl` line: the update's gradient norm (before clipping), entropy, clip fraction and approximate
KL (`train/*`), and for every (task type, role) group the spread of its rewards (`reward_std/<type>/<role>`). Eq 8
normalises advantages within a group, so a group whose rewards are all equal has every advantage 0 and adds nothing
but the entropy bonus to the gradient: its spread says whether it carried policy-gradient signal that step.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

UPDATE_KEYS = ("train/grad_norm", "train/entropy", "train/clip_fraction", "train/approx_kl")
"""The update diagnostics shown per step, in column order."""

GROUPS = tuple((task_type, role) for role in ("solve", "propose")
               for task_type in ("deduction", "abduction", "induction"))
"""(task type, role) groups in column order: the solver's first."""


@dataclass(frozen=True)
class StepDiagnosis:
    """One step: its update diagnostics (None where the line lacks them) and the groups with reward spread."""

    step: int
    update: dict[str, float | None]
    signal_groups: list[str]  # "<type>/<role>" of the groups whose rewards differed
    silent_groups: list[str]  # groups present with all rewards equal (every advantage 0)


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def diagnose(lines: Sequence[dict[str, Any]]) -> list[StepDiagnosis]:
    """The per-step diagnosis of `lines` (metrics-file lines), in step order; lines without a step are skipped."""
    out = []
    for line in sorted((x for x in lines if isinstance(x.get("step"), int)), key=lambda x: x["step"]):
        signal: list[str] = []
        silent: list[str] = []
        for task_type, role in GROUPS:
            spread = _number(line.get(f"reward_std/{task_type}/{role}"))
            if spread is not None:
                (signal if spread > 0 else silent).append(f"{task_type}/{role}")
        out.append(StepDiagnosis(step=line["step"], update={key: _number(line.get(key)) for key in UPDATE_KEYS},
                                 signal_groups=signal, silent_groups=silent))
    return out


def signal_counts(steps: Sequence[StepDiagnosis]) -> dict[str, int]:
    """For each group: the steps in which it carried signal (its rewards differed)."""
    counts = {f"{task_type}/{role}": 0 for task_type, role in GROUPS}
    for step in steps:
        for group in step.signal_groups:
            counts[group] = counts.get(group, 0) + 1
    return counts
