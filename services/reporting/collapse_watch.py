"""Does a run get right, or only shorter? Warnings and per-step rows from the collapse watch's metrics. Pure.

The 60-step CPU run's format-OK share rose while its answers shrank to a copy of the prompt's own example
(docs/runs/learn-cpu). `collapse_warnings` says so from the metrics lines, as `azr trend` prints it:
- a (task type, role) group whose median response length fell to half or less (first k against last k steps)
  while what would make it right did not rise: right answers (`solve_rate/<type>`) for solvers, valid proposals
  (`valid_rate/<type>`) for proposers;
- a group whose answers copy the prompt's own example in more than half of its responses over the last k steps.
`collapse_rows` gives the per-step view `azr trend --per-step` prints.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from statistics import fmean

from services.json_types import JsonValue

TASK_TYPES = ("deduction", "abduction", "induction")
ROLES = ("solve", "propose")
HALVED = 0.5
COPYING = 0.5


def _series(lines: Sequence[Mapping[str, JsonValue]], key: str) -> list[float]:
    return [float(line[key]) for line in lines if isinstance(line.get(key), (int, float))]


def _right_key(task_type: str, role: str) -> str:
    return f"solve_rate/{task_type}" if role == "solve" else f"valid_rate/{task_type}"


def collapse_warnings(lines: Sequence[Mapping[str, JsonValue]], window: int) -> list[str]:
    """The module docstring's warnings, one line each (empty: none)."""
    warnings = []
    for role in ROLES:
        for task_type in TASK_TYPES:
            group = f"{task_type}/{role}"
            lengths = _series(lines, f"response_tokens_median/{group}")
            right = _series(lines, _right_key(task_type, role))
            if len(lengths) >= 2 * window:
                before, after = fmean(lengths[:window]), fmean(lengths[-window:])
                right_before = fmean(right[:window]) if len(right) >= 2 * window else 0.0
                right_after = fmean(right[-window:]) if len(right) >= 2 * window else 0.0
                if before > 0 and after <= HALVED * before and right_after <= right_before:
                    what = "right answers" if role == "solve" else "valid proposals"
                    warnings.append(f"COLLAPSE? {group}: median response {before:.0f} -> {after:.0f} tokens "
                                    f"(first {window} vs last {window} steps) while {what} did not rise "
                                    f"({right_before:.3f} -> {right_after:.3f})")
            copies = _series(lines, f"example_copy/{group}")
            if len(copies) >= window and (share := fmean(copies[-window:])) > COPYING:
                warnings.append(f"COLLAPSE? {group}: {share:.0%} of the last {window} steps' answers are the "
                                "prompt's own example")
    return warnings


@dataclass(frozen=True)
class CollapseRow:
    """One step of the collapse watch."""

    step: int
    solver_lengths: tuple[float | None, ...]  # median response tokens per task type, solver
    proposer_lengths: tuple[float | None, ...]
    example_copy: float | None  # mean over the solver groups present
    has_program: float | None  # mean over the deduction and abduction proposers present
    correct_spread: int | None  # groups whose spread came from correctness
    valid: int  # valid proposals stored this step (`new/<type>` summed)


def _mean_of(line: Mapping[str, JsonValue], keys: Sequence[str]) -> float | None:
    values = [float(line[key]) for key in keys if isinstance(line.get(key), (int, float))]
    return fmean(values) if values else None


def collapse_rows(lines: Sequence[Mapping[str, JsonValue]]) -> list[CollapseRow]:
    rows = []
    for line in sorted((line for line in lines if isinstance(line.get("step"), int)), key=lambda line: line["step"]):
        def length(group: str, line: Mapping[str, JsonValue] = line) -> float | None:
            value = line.get(f"response_tokens_median/{group}")
            return float(value) if isinstance(value, (int, float)) else None

        spread = line.get("groups_with_correct_spread")
        rows.append(CollapseRow(
            step=line["step"],
            solver_lengths=tuple(length(f"{t}/solve") for t in TASK_TYPES),
            proposer_lengths=tuple(length(f"{t}/propose") for t in TASK_TYPES),
            example_copy=_mean_of(line, [f"example_copy/{t}/solve" for t in TASK_TYPES]),
            has_program=_mean_of(line, [f"has_program/{t}/propose" for t in ("deduction", "abduction")]),
            correct_spread=int(spread) if isinstance(spread, (int, float)) else None,
            valid=sum(int(line.get(f"new/{t}", 0) or 0) for t in TASK_TYPES)))
    return rows
