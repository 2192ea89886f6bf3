"""The per-step metrics line (one JSON object per step in `metrics.jsonl` of the run directory).

Pure: built from the step's records. Keys are stable (plots and the dashboard read them):
`valid_rate/<type>`, `reward/<type>/<role>`, `reward_std/<type>/<role>` (population spread of the group's rewards:
0 means every Eq 8 advantage of the group is 0, so it carries no policy-gradient signal this step),
`format_ok/<type>/<role>` (share of the group's responses passing the Eq 6 format check), `solve_rate/<type>`,
`learnability/<type>` (mean r̄ over valid, well-formed proposals),
`response_tokens/<type>/<role>`, `buffer/<type>`, `parse_failures/<type>/<reason>`,
`format_failures/<type>/<role>/<reason>`, `exec_status/<type>/<role>/<status>` (counts),
`time/<phase>` (seconds), plus `step`, `policy_version`, `episodes`.
"""

from __future__ import annotations

import json
import time
from collections import Counter, defaultdict
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from statistics import fmean, pstdev
from typing import TYPE_CHECKING

from services.json_types import JsonObject
from services.records import Episode

if TYPE_CHECKING:
    from services.ports import MetricSink


class PhaseTimer:
    """Wall time per phase (generation, executor, store_queue, training); what is left of the step is `other`."""

    def __init__(self) -> None:
        self.seconds: defaultdict[str, float] = defaultdict(float)
        self.started = time.perf_counter()

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        begun = time.perf_counter()
        try:
            yield
        finally:
            self.seconds[name] += time.perf_counter() - begun

    def breakdown(self) -> dict[str, float]:
        """Seconds per phase, `other` and `total`."""
        total = time.perf_counter() - self.started
        result = {f"time/{name}": round(value, 4) for name, value in self.seconds.items()}
        result["time/other"] = round(max(0.0, total - sum(self.seconds.values())), 4)
        result["time/total"] = round(total, 4)
        return result


def _mean(values: Sequence[float]) -> float | None:
    return round(fmean(values), 6) if values else None


def episode_metrics(episodes: Sequence[Episode]) -> JsonObject:
    """Mean and spread of the reward, format-OK share and response length per (task type, role) group."""
    groups: dict[tuple[str, str], list[Episode]] = {}
    for episode in episodes:
        groups.setdefault((episode.task_type.value, episode.role.value), []).append(episode)
    metrics: JsonObject = {"episodes": len(episodes)}
    for (task_type, role), members in sorted(groups.items()):
        rewards = [e.reward for e in members]
        metrics[f"reward/{task_type}/{role}"] = _mean(rewards)
        metrics[f"reward_std/{task_type}/{role}"] = round(pstdev(rewards), 6)
        verdicts = [float(e.format_ok) for e in members if e.format_ok is not None]
        metrics[f"format_ok/{task_type}/{role}"] = _mean(verdicts)
        metrics[f"response_tokens/{task_type}/{role}"] = _mean([float(len(e.response_ids)) for e in members])
        metrics[f"count/{task_type}/{role}"] = len(members)
    return metrics


def counts(prefix: str, values: Sequence[str | None]) -> dict[str, int]:
    """`prefix/<value>` -> occurrences, ignoring None."""
    return {f"{prefix}/{key}": count for key, count in sorted(Counter(v for v in values if v is not None).items())}


class MetricsLog:
    """Appends one JSON line per step to `<run_dir>/metrics.jsonl` (flushed and fsynced: a crash loses no step), then
    hands the line to `sinks` (TensorBoard, W&B: services/reporting/metric_sinks.py)."""

    def __init__(self, path: Path, sinks: Sequence[MetricSink] = ()) -> None:
        self.path = path
        self.sinks = list(sinks)
        path.parent.mkdir(parents=True, exist_ok=True)

    def append(self, metrics: JsonObject) -> None:
        with self.path.open("a") as stream:
            stream.write(json.dumps(metrics, sort_keys=True) + "\n")
            stream.flush()
        for sink in self.sinks:
            sink.write(metrics)

    def close(self) -> None:
        """Close the sinks (flush TensorBoard's file, finish a W&B run)."""
        for sink in self.sinks:
            sink.close()

    def read(self) -> list[JsonObject]:
        """Every line written so far (for plots, resume and tests)."""
        if not self.path.exists():
            return []
        return [json.loads(line) for line in self.path.read_text().splitlines() if line.strip()]
