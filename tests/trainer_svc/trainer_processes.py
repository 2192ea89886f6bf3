"""The environment of an `azr trainer` process started by a test: real Redis, CPU, a run root of the test's own."""

from __future__ import annotations

import os
from pathlib import Path


def redis_trainer_env(tmp_path: Path, redis_url: str, **overrides: str) -> dict[str, str]:
    """This process's environment plus the trainer settings both process tests share (B = 1, a large lr so one
    update shows, a full checkpoint every update unless a test says otherwise, five kept); ``overrides`` add or
    replace AZR_* variables."""
    return {**os.environ, "AZR_RUN_ROOT": str(tmp_path / "runs"), "AZR_REDIS_URL": redis_url, "AZR_BATCH_SIZE": "1",
            "AZR_DEVICE": "cpu", "AZR_MAX_STALENESS": "10", "AZR_LEARNING_RATE": "1e-3", "AZR_QUEUE_BACKEND": "redis",
            "AZR_KEEP_CHECKPOINTS": "5", "AZR_CHECKPOINT_EVERY": "1", **overrides}
