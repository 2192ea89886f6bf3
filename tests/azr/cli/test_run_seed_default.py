"""`azr run` seeds from the authors' seed triplets shipped with the package by default (a documented departure the
0.5B default needs); `--no-seed-file` seeds from the zero triplet with the model, as the paper does."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from services.algorithm.task_types import TaskType
from services.settings import Settings
from services.settings.profiles import PACKAGED_SEED_FILES
from services.store import open_store

AZR = [sys.executable, "-m", "azr"]


def test_the_embedded_profile_defaults_to_the_shipped_seed_files(shared_dir: Path) -> None:
    assert Settings().rollout.seed_files == list(PACKAGED_SEED_FILES)
    assert Settings(profile="distributed").rollout.seed_files == []  # the paper's way: the base model seeds
    for path in PACKAGED_SEED_FILES:
        shipped = path.read_bytes()
        assert shipped == (shared_dir / "data" / "azr_seeds" / path.name).read_bytes(), path.name
        assert len(shipped.splitlines()) == 256
    first = json.loads(PACKAGED_SEED_FILES[0].read_text().splitlines()[0])
    assert first["snippet"] == "def f(a):\n    return a"  # the zero triplet leads, as in the authors' file


def _run(cwd: Path, *args: str) -> str:
    env = {**os.environ, "AZR_RUN_API_PORT": "0", "AZR_EXECUTOR_WORKERS": "2", "AZR_SEED_MAX_ROUNDS": "1",
           "AZR_MAX_RESPONSE_TOKENS": "8", "AZR_TENSORBOARD": "0"}
    env.pop("AZR_SEED_FILES", None)
    env.pop("AZR_DATABASE_URL", None)  # the suite's own database (tests/conftest.py): the run's is runs/default's file
    done = subprocess.run([*AZR, "run", "--model", "tiny", "--steps", "0", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stderr


def _counts(cwd: Path) -> dict[TaskType, int]:
    store = open_store(f"sqlite:///{cwd / 'runs' / 'default' / 'buffers.sqlite3'}", buffer_cap=16384)
    try:
        return {task_type: store.count(task_type) for task_type in TaskType}
    finally:
        store.close()


@pytest.mark.slow
def test_run_imports_the_shipped_seeds_and_no_seed_file_leaves_them_out(tmp_path: Path) -> None:
    shipped = tmp_path / "shipped"
    shipped.mkdir()
    output = _run(shipped)
    for path in PACKAGED_SEED_FILES:
        assert f"imported seeds from {path}" in output
    counts = _counts(shipped)
    # All but the rows our executor rejects (nondeterministic, no return, too large: a handful of each file).
    assert counts[TaskType.DEDUCTION] > 230 and counts[TaskType.ABDUCTION] > 230 and counts[TaskType.INDUCTION] > 230

    bare = tmp_path / "bare"
    bare.mkdir()
    output = _run(bare, "--no-seed-file")
    assert "imported seeds" not in output
    assert "seeding D_ded/D_abd round 1" in output  # the model seeds from the zero triplet
    # Off a terminal the live display still reports every generation batch, and the thread count is said.
    assert "generation: step " in output and "tok/s" in output
    assert "torch uses " in output
    counts = _counts(bare)
    assert counts[TaskType.DEDUCTION] < 10 and counts[TaskType.INDUCTION] < 10


def test_seed_file_and_no_seed_file_together_are_a_usage_error(tmp_path: Path) -> None:
    env = {**os.environ, "AZR_RUN_API_PORT": "0"}
    done = subprocess.run([*AZR, "run", "--model", "tiny", "--steps", "0", "--no-seed-file", "--seed-file",
                           str(PACKAGED_SEED_FILES[0])], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 2 and "contradict" in done.stderr, done.stderr[-2000:]
