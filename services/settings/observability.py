"""Watching a run: the Prometheus endpoints of the processes without an HTTP app, the run's own dashboard API, the
periodic CRUXEval evaluation, and the TensorBoard and W&B copies of the metrics lines."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field

from services.settings.profiles import default_eval_data
from services.settings.section import SettingsSection


class ObservabilitySettings(SettingsSection):
    """Metrics endpoints (the APIs serve /metrics on their own port), evaluation and experiment tracking."""

    run_api_port: int = Field(8001, ge=0, le=65535)
    """`azr run` only: loopback port of the run's own proposer API (buffers, seeds, `/dashboard`, `/metrics` with the
    coordinator's and executor's metrics); 0 = off. A busy port is reported and the run goes on without it."""
    coordinator_metrics_port: int = Field(0, ge=0, le=65535)
    """Port of `azr coordinator`'s Prometheus endpoint (`/metrics`); 0 = off."""
    trainer_metrics_port: int = Field(0, ge=0, le=65535)
    """Port of `azr trainer`'s Prometheus endpoint (`/metrics`); 0 = off."""
    executor_metrics_port: int = Field(0, ge=0, le=65535)
    """Port of each `azr worker executor` process's Prometheus endpoint (`/metrics`); 0 = off."""
    metrics_address: str = "0.0.0.0"
    """Address those metrics endpoints bind to (all interfaces by default, so Prometheus can reach the pod)."""
    eval_every_steps: int = Field(0, ge=0)
    """Evaluate CRUXEval-O and -I (greedy, our solver prompts and executor checks) after every k-th self-play step,
    writing `eval/cruxeval_o`, `eval/cruxeval_i` and their `/count` into that step's metrics line; 0 = off (the
    default in both profiles: it costs 2 × `eval_limit` greedy generations each time)."""
    eval_limit: int = Field(200, ge=0)
    """Rows of `eval_data` per split that the periodic evaluation uses: the first ones of the file, the same every
    time, so steps compare; 0 = all rows."""
    eval_data: Path = Field(default_factory=default_eval_data)
    """CRUXEval-format JSONL (`code`, `input`, `output`, `id` per line) for the periodic evaluation; read when the
    coordinator starts (a missing or malformed file stops it there, naming the line)."""
    tensorboard: bool = True
    """Also write every metrics line's numeric values as TensorBoard scalars (step = the line's step) to
    `<run_dir>/tensorboard/` (`azr run`, `azr coordinator`); view with `tensorboard --logdir runs`."""
    wandb: bool = False
    """Also log every metrics line to Weights & Biases (`wandb.log`, step = the line's step) when the `wandb` package
    is installed; without it the run says so once and goes on. wandb's own variables apply (WANDB_MODE=offline...)."""
    wandb_project: str = "azr"
    """Weights & Biases project the runs are logged to (the run's name is `run_id`)."""
