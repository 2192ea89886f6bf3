"""Prometheus metrics of the self-play coordinator, served by `azr coordinator` on `AZR_COORDINATOR_METRICS_PORT`.

Step metrics are read off the step's metrics line (services/coordinator/step_metrics.py, keys documented in
docs/self-play-decisions.md), so the scrape and `metrics.jsonl` always agree: the loop hands each finished line to
`observe_step`. Queue depths are read from their queues at scrape time.

Gauges named `last step` describe the latest finished step only; a group the step had no data for (e.g. an empty
solve group) has its series removed rather than left at an older step's value.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping
from typing import TypeGuard

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from services.json_types import JsonValue
from services.ports import EpisodeQueue

PHASE_SECONDS_BUCKETS = (0.1, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1200.0, 3600.0)
"""A phase of a step lasts from well under a second (tiny model) to many minutes (B = 64, 8k-token responses)."""

DepthReader = Callable[[], int]
"""Returns a queue's current depth; may raise when its server is down."""


class QueueDepthCollector(Collector):
    """Gauges read at scrape time, one per registered reader; NaN when the reader raises (server down)."""

    def __init__(self) -> None:
        self.readers: dict[str, tuple[str, DepthReader]] = {}

    def add(self, name: str, documentation: str, read: DepthReader) -> None:
        """Expose `read()` as the gauge `name`."""
        self.readers[name] = (documentation, read)

    def collect(self) -> Iterator[GaugeMetricFamily]:
        """One gauge per reader, read now."""
        for name, (documentation, read) in self.readers.items():
            try:
                value = float(read())
            except Exception:  # a scrape must not fail because Redis is down; NaN shows it
                value = math.nan
            yield GaugeMetricFamily(name, documentation, value=value)


class CoordinatorMetrics:
    """The coordinator's metrics in their own registry; `observe_step` is the loop's per-step hook."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        r = self.registry
        self.steps = Counter("azr_coordinator_steps", "Self-play steps finished", registry=r)
        self.step = Gauge("azr_coordinator_step", "Number of the last finished step", registry=r)
        self.policy_version = Gauge("azr_coordinator_policy_version",
                                    "Policy version after the last finished step", registry=r)
        self.proposals = Counter("azr_coordinator_proposals", "Proposals by task type and outcome: valid (status ok), "
                                 "invalid (status = the executor's verdict) or parse_failure (status = the reason)",
                                 ["task_type", "outcome", "status"], registry=r)
        self.episodes = Counter("azr_coordinator_episodes", "Episodes published to the trainer",
                                ["task_type", "role"], registry=r)
        self.dropped = Counter("azr_coordinator_dropped", "Episodes (role propose/solve) and learnability samples "
                               "(role learnability) dropped after the executor failed twice for infrastructure "
                               "reasons: never scored", ["task_type", "role"], registry=r)
        self.format_failures = Counter("azr_coordinator_format_failures", "Responses that failed the Eq 6 format "
                                       "check, by reason", ["task_type", "role", "reason"], registry=r)
        self.valid_rate = Gauge("azr_coordinator_valid_rate_ratio",
                                "Share of the last step's proposals the executor accepted", ["task_type"], registry=r)
        self.solve_rate = Gauge("azr_coordinator_solve_rate_ratio",
                                "Solver accuracy on the last step's batch", ["task_type"], registry=r)
        self.learnability = Gauge("azr_coordinator_learnability_ratio", "Mean solve rate r̄ of the n samples on the "
                                  "last step's valid proposals", ["task_type"], registry=r)
        self.reward = Gauge("azr_coordinator_reward_mean", "Mean reward (Eq 6) of the last step",
                            ["task_type", "role"], registry=r)
        self.response_tokens = Gauge("azr_coordinator_response_tokens_mean", "Mean response length of the last "
                                     "step, in tokens", ["task_type", "role"], registry=r)
        self.buffer = Gauge("azr_coordinator_buffer_entries", "Entries per buffer after the last step",
                            ["task_type"], registry=r)
        self.last_phase = Gauge("azr_coordinator_last_step_phase_seconds",
                                "Wall time of each phase of the last step (total = the whole step)", ["phase"],
                                registry=r)
        self.phase = Histogram("azr_coordinator_step_phase_seconds", "Wall time of each phase per step (total = the "
                               "whole step)", ["phase"], buckets=PHASE_SECONDS_BUCKETS, registry=r)
        self._last_step_series: set[tuple[str, tuple[str, ...]]] = set()  # (line prefix, labels) set last step
        self.depths = QueueDepthCollector()
        r.register(self.depths)

    # ------------------------------------------------------------------------------------------------ scrape time

    def watch_episode_queue(self, queue: EpisodeQueue) -> None:
        """Expose the episode queue's depth (published, not yet read) and unacknowledged deliveries."""
        self.depths.add("azr_episode_queue_depth_episodes", "Episodes published and not yet read by a trainer",
                        queue.depth)
        self.depths.add("azr_episode_queue_unacked_episodes", "Episodes read by a trainer and not yet acknowledged",
                        queue.pending)

    def watch_executor_queue(self, count: DepthReader) -> None:
        """Expose the RQ executor queue's depth (`count()`: jobs waiting for a worker)."""
        self.depths.add("azr_executor_queue_depth_jobs", "Executor jobs waiting in the RQ queue for a worker", count)

    # ------------------------------------------------------------------------------------------------ per step

    def observe_step(self, line: Mapping[str, JsonValue]) -> None:
        """Record one finished step from its metrics line."""
        self.steps.inc()
        self._set(self.step, (), line.get("step"))
        self._set(self.policy_version, (), line.get("policy_version_after", line.get("policy_version")))
        last_step_gauges: dict[str, tuple[Gauge, int]] = {  # line prefix -> gauge, label count
            "valid_rate": (self.valid_rate, 1), "solve_rate": (self.solve_rate, 1),
            "learnability": (self.learnability, 1), "reward": (self.reward, 2),
            "response_tokens": (self.response_tokens, 2), "buffer": (self.buffer, 1), "time": (self.last_phase, 1)}
        now_set: set[tuple[str, tuple[str, ...]]] = set()
        for key, value in line.items():
            prefix, _, rest = key.partition("/")
            labels = tuple(rest.split("/")) if rest else ()
            if prefix in last_step_gauges and len(labels) == last_step_gauges[prefix][1] and _is_number(value):
                last_step_gauges[prefix][0].labels(*labels).set(value)
                now_set.add((prefix, labels))
            if not _is_number(value):
                continue
            if prefix == "time" and len(labels) == 1:
                self.phase.labels(*labels).observe(value)
            elif prefix == "count" and len(labels) == 2:
                self.episodes.labels(*labels).inc(value)
            elif prefix == "exec_status" and len(labels) == 3 and labels[1] == "propose":
                outcome = "valid" if labels[2] == "ok" else "invalid"
                self.proposals.labels(labels[0], outcome, labels[2]).inc(value)
            elif prefix == "parse_failures" and len(labels) == 2:
                self.proposals.labels(labels[0], "parse_failure", labels[1]).inc(value)
            elif prefix == "dropped" and len(labels) == 2:
                self.dropped.labels(*labels).inc(value)
            elif prefix == "format_failures" and len(labels) == 3:
                self.format_failures.labels(*labels).inc(value)
        # A group absent from this step must not keep an older step's value (removed after the new values are set,
        # so a concurrent scrape never sees the gauges empty).
        for prefix, labels in self._last_step_series - now_set:
            last_step_gauges[prefix][0].remove(*labels)
        self._last_step_series = now_set

    @staticmethod
    def _set(gauge: Gauge, labels: tuple[str, ...], value: JsonValue) -> None:
        """Set a gauge (child) to a numeric value; None (no data this step) leaves the series absent."""
        if _is_number(value):
            (gauge.labels(*labels) if labels else gauge).set(value)


def _is_number(value: JsonValue) -> TypeGuard[int | float]:
    """An int or float of the metrics line (None means no data; bools are not measurements)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)
