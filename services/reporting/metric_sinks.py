"""Where each step's metrics line goes besides `metrics.jsonl`: TensorBoard event files and Weights & Biases.

`metrics.jsonl` stays the record (plots, the dashboard and resume read it); these sinks copy every line's numeric
values to the tools the RL post-training ecosystem watches runs with. Scalars only: a key whose value is an int or
a float (not a bool, not None, not text) becomes a scalar of the same name; its step is the line's `step`.

- TensorBoard (`tensorboard`, on by default): event files in `<run_dir>/tensorboard/`, one Event per line written
  with tensorboardX's synchronous EventsWriter and flushed before `write` returns (its SummaryWriter queues events
  for a background thread, so a line could still be missing after a crash or while a reader looks); one file per
  process (a resumed run adds a file; TensorBoard reads them together).
- Weights & Biases (`wandb`, off by default): `wandb.log` per line, when the `wandb` package is installed; without it
  the run says so once and goes on without it. wandb's own variables (WANDB_MODE=offline, WANDB_API_KEY) apply.
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from services.ports import MetricSink

if TYPE_CHECKING:
    from tensorboardX.event_file_writer import EventsWriter

    from services.json_types import JsonObject
    from services.settings import ObservabilitySettings, RunSettings

TENSORBOARD_DIR = "tensorboard"
"""The event files' directory inside the run directory."""


def numeric_scalars(line: JsonObject) -> dict[str, float]:
    """The line's numeric values by key (ints and floats, not bools), without `step` itself (it is the x axis)."""
    return {key: float(value) for key, value in line.items()
            if key != "step" and isinstance(value, (int, float)) and not isinstance(value, bool)}


class TensorBoardSink:
    """Each line's numeric values as TensorBoard scalars in `log_dir`: one Event per line, on disk when `write`
    returns (the file is created at the first line)."""

    def __init__(self, log_dir: Path) -> None:
        self.log_dir = log_dir
        self._writer: EventsWriter | None = None

    def write(self, line: JsonObject) -> None:
        from tensorboardX.proto.event_pb2 import Event
        from tensorboardX.proto.summary_pb2 import Summary
        from tensorboardX.summary import scalar

        if self._writer is None:
            from tensorboardX.event_file_writer import EventsWriter

            self.log_dir.mkdir(parents=True, exist_ok=True)
            # The default file name has a one-second resolution; two writers in one second would share (and truncate)
            # a file, so the process id and a random tag make it unique.
            suffix = f".{os.getpid()}.{uuid.uuid4().hex[:8]}"
            self._writer = EventsWriter(str(self.log_dir / "events"), suffix)
        values = [value for tag, number in numeric_scalars(line).items() for value in scalar(tag, number).value]
        event = Event(wall_time=time.time(), step=int(line.get("step", 0)), summary=Summary(value=values))
        self._writer.write_event(event)
        self._writer.flush()

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._writer = None


class WandbRun(Protocol):
    """What the sink uses of a Weights & Biases run (`wandb.init`'s result)."""

    def log(self, data: dict[str, float], step: int) -> None: ...

    def finish(self) -> None: ...


class WandbSink:
    """Each line's numeric values logged to a Weights & Biases run (`run.log(values, step=step)`)."""

    def __init__(self, run: WandbRun) -> None:
        self.run = run

    def write(self, line: JsonObject) -> None:
        self.run.log(numeric_scalars(line), step=int(line.get("step", 0)))

    def close(self) -> None:
        self.run.finish()


def open_wandb_sink(settings: ObservabilitySettings, run: RunSettings, say: Callable[[str], None],
                    run_config: JsonObject) -> WandbSink | None:
    """A W&B run named `run.run_id` in `settings.wandb_project`, with `run_config` (the resolved settings) as its
    config; None (and a message) when wandb is missing."""
    try:
        import wandb
    except ImportError:
        say("wandb is on (AZR_WANDB) but the wandb package is not installed: not logging to Weights & Biases "
            "(pip install wandb)")
        return None
    wandb_run = wandb.init(project=settings.wandb_project, name=run.run_id, dir=str(run.run_dir), config=run_config)
    say(f"logging to Weights & Biases: project {settings.wandb_project}, run {run.run_id}")
    return WandbSink(wandb_run)


def open_metric_sinks(settings: ObservabilitySettings, run: RunSettings, say: Callable[[str], None],
                      run_config: JsonObject) -> list[MetricSink]:
    """The sinks `settings` asks for, in the run's directory: TensorBoard (`tensorboard`) and W&B (`wandb`, when
    installed; `run_config` is the run's config there)."""
    sinks: list[MetricSink] = []
    if settings.tensorboard:
        sinks.append(TensorBoardSink(run.run_dir / TENSORBOARD_DIR))
    if settings.wandb:
        wandb_sink = open_wandb_sink(settings, run, say, run_config)
        if wandb_sink is not None:
            sinks.append(wandb_sink)
    return sinks
