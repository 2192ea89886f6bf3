"""Where each step's metrics line goes besides `metrics.jsonl`.

Adapters: `services.reporting.metric_sinks.TensorBoardSink` and `WandbSink`.
"""

from __future__ import annotations

from typing import Protocol

from services.json_types import JsonObject


class MetricSink(Protocol):
    """Receives every metrics line after it is in `metrics.jsonl`."""

    def write(self, line: JsonObject) -> None:
        """Record one step's metrics line."""

    def close(self) -> None:
        """Flush and release what the sink holds."""
