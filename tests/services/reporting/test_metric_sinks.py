"""Every metrics line reaches TensorBoard (event files read back byte by byte) and, when installed and on, W&B."""

from __future__ import annotations

import sys
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from tensorboard_events import read_events, read_scalars

from services.coordinator.step_metrics import MetricsLog
from services.ports import MetricSink
from services.reporting.metric_sinks import TensorBoardSink, numeric_scalars, open_metric_sinks
from services.settings import Settings

LINES = [
    {"step": 1, "reward/deduction/solve": -0.5, "valid_rate/deduction": 0.25, "episodes": 12, "time/total": 3.5,
     "solve_rate/induction": None, "note": "text is not a scalar", "stopped": False, "buffer/sizes": {"a": 1}},
    {"step": 2, "reward/deduction/solve": 0.75, "valid_rate/deduction": 1.0, "episodes": 12, "time/total": 2.25,
     "eval/cruxeval_o": 0.5},
]


def test_numeric_scalars_keep_ints_and_floats_only() -> None:
    assert numeric_scalars(LINES[0]) == {"reward/deduction/solve": -0.5, "valid_rate/deduction": 0.25,
                                         "episodes": 12.0, "time/total": 3.5}


def test_every_line_becomes_scalars_at_its_step(tmp_path: Path) -> None:
    log = MetricsLog(tmp_path / "run" / "metrics.jsonl", sinks=[TensorBoardSink(tmp_path / "run" / "tensorboard")])
    for line in LINES:
        log.append(line)
    # Flushed after each line: readable while the run goes on, before close().
    assert read_scalars(tmp_path / "run" / "tensorboard")["reward/deduction/solve"] == {1: -0.5, 2: 0.75}
    log.close()
    assert log.read() == LINES  # metrics.jsonl is unchanged by the sinks
    scalars = read_scalars(tmp_path / "run" / "tensorboard")
    assert scalars == {
        "reward/deduction/solve": {1: -0.5, 2: 0.75},
        "valid_rate/deduction": {1: 0.25, 2: 1.0},
        "episodes": {1: 12.0, 2: 12.0},
        "time/total": {1: 3.5, 2: 2.25},
        "eval/cruxeval_o": {2: 0.5},
    }
    (event_file,) = (tmp_path / "run" / "tensorboard").iterdir()
    assert read_events(event_file)[0].file_version == "brain.Event:2"  # what TensorBoard looks for first


def test_a_resumed_run_adds_a_file_and_both_are_read(tmp_path: Path) -> None:
    first = MetricsLog(tmp_path / "metrics.jsonl", sinks=[TensorBoardSink(tmp_path / "tb")])
    first.append(LINES[0])
    first.close()
    again = MetricsLog(tmp_path / "metrics.jsonl", sinks=[TensorBoardSink(tmp_path / "tb")])  # the same second
    again.append(LINES[1])
    again.close()
    assert len(list((tmp_path / "tb").iterdir())) == 2
    assert read_scalars(tmp_path / "tb")["time/total"] == {1: 3.5, 2: 2.25}


def sinks_for(settings: Settings, say: Callable[[str], None]) -> list[MetricSink]:
    """The sinks `azr.factory` opens for these settings: their observability and run sections, the whole record."""
    return open_metric_sinks(settings.observability, settings.run, say, settings.resolved())


def test_settings_choose_the_sinks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    said: list[str] = []
    settings = Settings(run_root=tmp_path, run_id="r")
    (tensorboard,) = sinks_for(settings, said.append)
    assert isinstance(tensorboard, TensorBoardSink) and tensorboard.log_dir == tmp_path / "r" / "tensorboard"
    assert sinks_for(settings.with_values(tensorboard=False), said.append) == []
    monkeypatch.setitem(sys.modules, "wandb", None)  # as if not installed, whatever this machine has
    sinks = sinks_for(settings.with_values(wandb=True), said.append)
    assert [type(sink) for sink in sinks] == [TensorBoardSink]
    assert said == ["wandb is on (AZR_WANDB) but the wandb package is not installed: not logging to Weights & Biases "
                    "(pip install wandb)"]


class RecordingWandb(types.ModuleType):
    """Stands in for the wandb package (no account, no network): records init, log and finish."""

    def __init__(self) -> None:
        super().__init__("wandb")
        self.calls: list[tuple[str, Any]] = []

    def init(self, **kwargs: Any) -> RecordingWandb:
        self.calls.append(("init", kwargs))
        return self

    def log(self, values: dict[str, float], step: int) -> None:
        self.calls.append(("log", (values, step)))

    def finish(self) -> None:
        self.calls.append(("finish", None))


def test_wandb_gets_every_line_when_installed_and_on(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    wandb = RecordingWandb()
    monkeypatch.setitem(sys.modules, "wandb", wandb)
    settings = Settings(run_root=tmp_path, run_id="r", tensorboard=False, wandb=True, wandb_project="p")
    log = MetricsLog(tmp_path / "r" / "metrics.jsonl", sinks=sinks_for(settings, lambda _: None))
    for line in LINES:
        log.append(line)
    log.close()
    (init, *logged, finish) = wandb.calls
    assert init[0] == "init" and (init[1]["project"], init[1]["name"]) == ("p", "r")
    assert init[1]["config"]["api_token"] != settings.api.api_token.get_secret_value()  # the masked settings
    assert logged == [("log", (numeric_scalars(line), line["step"])) for line in LINES]
    assert finish == ("finish", None)
