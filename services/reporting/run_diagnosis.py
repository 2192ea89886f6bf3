"""Per-step diagnosis of a run that does or does not learn: the update's health, which groups carried signal, and
why responses earned what they did. Pure.

From each `metrics.jsonl` line: the update's gradient norm (before clipping), entropy, clip fraction and approximate
KL (`train/*`), and for every (task type, role) group the spread of its rewards (`reward_std/<type>/<role>`). Eq 8
normalises advantages within a group, so a group whose rewards are all equal has every advantage 0 and adds nothing
but the entropy bonus to the gradient: its spread says whether it carried policy-gradient signal that step. The
outcome counts (`format_failures/*`, `parse_failures/*`, `exec_status/*`) say where a group's rewards come from.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from services.json_types import JsonObject, JsonValue

OUTCOME_PREFIXES = ("format_failures/", "parse_failures/", "exec_status/")
"""Per-step counts of why responses failed the format (Eq 6), why proposals failed to parse, and what the executor
found: `format_failures/<type>/<role>/<reason>`, `parse_failures/<type>/<reason>`,
`exec_status/<type>/<role>/<status>`."""

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


def _number(value: JsonValue) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def diagnose(lines: Sequence[JsonObject]) -> list[StepDiagnosis]:
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


@dataclass(frozen=True)
class OutcomeCount:
    """One outcome key summed over all steps, over the first k and over the last k."""

    key: str
    total: int
    first: int
    last: int


def outcome_counts(lines: Sequence[JsonObject], window: int) -> list[OutcomeCount]:
    """Every outcome key of `lines` (metrics-file lines; see OUTCOME_PREFIXES) with its count over all steps, the
    first `window` steps and the last `window` (they overlap when there are fewer than 2 x window), most frequent
    first."""
    steps = sorted((x for x in lines if isinstance(x.get("step"), int)), key=lambda x: x["step"])
    keys = {key for line in steps for key in line if key.startswith(OUTCOME_PREFIXES)}

    def total(chunk: Sequence[JsonObject], key: str) -> int:
        return int(sum(_number(line.get(key)) or 0 for line in chunk))

    counts = [OutcomeCount(key, total(steps, key), total(steps[:window], key), total(steps[-window:], key))
              for key in keys]
    return sorted(counts, key=lambda c: (-c.total, c.key))
