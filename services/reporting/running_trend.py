"""The line a running self-play loop prints after each step so a rise shows as it happens: the solvers' format-OK
share and reward (the three task types pooled) over the run's first steps and its latest ones. A glance, not a
test: `azr trend` compares the two windows with a permutation test."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from services.json_types import JsonValue

TASK_TYPES = ("deduction", "abduction", "induction")


def _pooled(lines: Sequence[Mapping[str, JsonValue]], kind: str) -> float | None:
    values = [float(line[key]) for line in lines for t in TASK_TYPES
              if isinstance(line.get(key := f"{kind}/{t}/solve"), (int, float)) and math.isfinite(line[key])]
    return sum(values) / len(values) if values else None


def running_trend(lines: Sequence[Mapping[str, JsonValue]], window: int = 5) -> str | None:
    """'trend, steps a-b -> c-d: solver format-OK x -> y, solver reward x -> y', once the run holds two windows of
    steps (in step order); None before."""
    ordered = sorted(lines, key=lambda line: int(line.get("step", 0)))
    if len(ordered) < 2 * window:
        return None
    first, last = ordered[:window], ordered[-window:]
    parts = []
    for kind, label in (("format_ok", "solver format-OK"), ("reward", "solver reward")):
        before, after = _pooled(first, kind), _pooled(last, kind)
        if before is not None and after is not None:
            parts.append(f"{label} {before:.2f} -> {after:.2f}")
    if not parts:
        return None
    span = f"steps {first[0].get('step')}-{first[-1].get('step')} -> {last[0].get('step')}-{last[-1].get('step')}"
    return f"trend, {span}: " + ", ".join(parts) + " (azr trend tests it)"
