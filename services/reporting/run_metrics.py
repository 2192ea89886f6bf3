"""Read a run's `metrics.jsonl` into tidy per-key series over steps (pure, no plotting).

One JSON object per self-play step (services/coordinator/step_metrics.py and step.py name the keys). What this module
decides:
- A line that is not a JSON object (typically the truncated last line of a process killed mid-write), or that has
  no integer `step`, is skipped and reported in `RunMetrics.skipped`; the other lines still count.
- A step logged twice (a step re-run after a crash) keeps its last line: that is the one whose episodes were trained.
- A value that is absent, None, a bool, a string or not finite is a gap (NaN) at that step, so a figure shows a break
  in the line rather than a made-up value.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path

from services.json_types import JsonObject, JsonValue

METRICS_FILE_NAME = "metrics.jsonl"
"""Name of the per-step metrics file inside a run directory."""

KNOWN_TASK_TYPES: tuple[str, ...] = ("deduction", "abduction", "induction")
"""Task types in the order figures show them (others found in the file follow, sorted)."""

KNOWN_ROLES: tuple[str, ...] = ("propose", "solve")
"""Roles in the order figures show them."""


class MetricsFileError(Exception):
    """The run has no usable metrics: no file, or no line that could be read."""


@dataclass(frozen=True)
class SkippedLine:
    """A line of the metrics file that was not used, and why."""

    line_number: int  # 1-based, as an editor shows it
    reason: str


@dataclass(frozen=True)
class Series:
    """One metric over the run's steps: `values[i]` belongs to `steps[i]`; NaN marks a step without a value."""

    key: str
    steps: list[int]
    values: list[float]

    @property
    def has_data(self) -> bool:
        """Whether at least one step has a value."""
        return any(not math.isnan(value) for value in self.values)

    def present(self) -> Series:
        """Only the steps that have a value (for sparse metrics such as evaluations, drawn as connected points)."""
        kept = [(step, value) for step, value in zip(self.steps, self.values) if not math.isnan(value)]
        return Series(self.key, [step for step, _ in kept], [value for _, value in kept])


@dataclass
class RunMetrics:
    """The usable lines of one metrics file, one per step in step order, plus the lines that were skipped."""

    path: Path
    lines: list[JsonObject]
    skipped: list[SkippedLine] = field(default_factory=list)

    @property
    def steps(self) -> list[int]:
        """The steps that have a line, ascending."""
        return [int(line["step"]) for line in self.lines]

    def keys(self) -> set[str]:
        """Every key that occurs in at least one line."""
        return {key for line in self.lines for key in line}

    def series(self, key: str) -> Series:
        """`key` over all steps; a step without a numeric value for it is NaN."""
        return Series(key, self.steps, [numeric_or_nan(line.get(key)) for line in self.lines])

    def has_values(self, key: str) -> bool:
        """Whether any step has a numeric value for `key`."""
        return any(not math.isnan(numeric_or_nan(line.get(key))) for line in self.lines)

    def task_types(self) -> list[str]:
        """Task types named by per-type keys (`reward/<type>/...`, `valid_rate/<type>`, `task/<type>/<metric>`, ...)."""
        found = set()
        for key in self.keys():
            parts = key.split("/")
            # `task/<metric>` is over all types; only the three-part `task/<type>/<metric>` names one.
            if (len(parts) >= 2 and parts[0] in _TYPED_PREFIXES) or (len(parts) == 3 and parts[0] == "task"):
                found.add(parts[1])
        return ordered(found, KNOWN_TASK_TYPES)


_TYPED_PREFIXES = frozenset({"reward", "response_tokens", "valid_rate", "buffer", "solve_rate", "learnability"})
"""Key prefixes whose second part is a task type."""


def ordered(names: set[str], preferred: tuple[str, ...]) -> list[str]:
    """`names` with the preferred ones first in their given order, then the rest sorted."""
    return [name for name in preferred if name in names] + sorted(names - set(preferred))


def numeric_or_nan(value: JsonValue) -> float:
    """A finite int/float as float; anything else (None, bool, str, inf, NaN, absent) as NaN."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return math.nan
    number = float(value)
    return number if math.isfinite(number) else math.nan


def parse_metrics_text(text: str, path: Path) -> RunMetrics:
    """Parse the text of a metrics file: usable lines by step (last one wins per step), skipped lines with reasons."""
    by_step: dict[int, JsonObject] = {}
    skipped: list[SkippedLine] = []
    for number, raw in enumerate(text.splitlines(), start=1):
        if not raw.strip():
            continue
        try:
            line = json.loads(raw)
        except json.JSONDecodeError as error:
            skipped.append(SkippedLine(number, f"not valid JSON ({error.msg}); a write cut short?"))
            continue
        if not isinstance(line, dict):
            skipped.append(SkippedLine(number, f"a JSON {type(line).__name__}, not an object"))
            continue
        step = line.get("step")
        if isinstance(step, bool) or not isinstance(step, int):
            skipped.append(SkippedLine(number, f"no integer `step` (got {step!r})"))
            continue
        by_step[step] = line
    return RunMetrics(path=path, lines=[by_step[step] for step in sorted(by_step)], skipped=skipped)


def load_run_metrics(run_dir: Path) -> RunMetrics:
    """Read `run_dir/metrics.jsonl`. Raises MetricsFileError when it is missing or holds no usable line."""
    path = run_dir / METRICS_FILE_NAME
    if not run_dir.is_dir():
        raise MetricsFileError(f"{run_dir} is not a directory")
    if not path.is_file():
        raise MetricsFileError(f"{path} not found: is {run_dir} a run directory, and has a step finished yet?")
    metrics = parse_metrics_text(path.read_text(encoding="utf-8", errors="replace"), path)
    if not metrics.lines:
        detail = f" ({len(metrics.skipped)} unreadable)" if metrics.skipped else ""
        raise MetricsFileError(f"{path} has no usable step line{detail}")
    return metrics
