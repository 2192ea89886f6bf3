"""`azr run` SIGKILLed between an update and its full checkpoint (k = 3), then resumed: the updates that died with
the process are made again from the episodes the store kept, none twice, and the final trainer state is bitwise
that of one uninterrupted trainer applying every recorded step's episodes in order, under the run's own settings
(its settings.json: precision included) and with the thread count the run's updates used (`update_threads`: on
some CPUs an update's last bits depend on it). CI runs this again with AZR_CPU_NATIVE_BF16=1: the bf16 engine and
the bf16 autocast update of a CPU with native bf16."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from trainer_states import (
    assert_bitwise_equal,
    optimizer_steps,
    saved_settings,
    threads_for_updates,
    trainer_state,
)

from azr.embedded_trainer import step_episodes
from services.inference.tiny_model import tiny_model_dir
from services.store import open_store
from trainer_svc.checkpoints import list_checkpoints
from trainer_svc.resume import fresh_trainer, restore_trainer

RUN = "killed"
SIZES = ["--model", "tiny", "--batch-size", "1", "--max-response-tokens", "8", "--run-id", RUN]


def azr_run(cwd: Path, *args: str) -> subprocess.Popen[str]:
    # The tiny model's rewards are all -1: with the embedded default (no step without signal) no update would step
    # and the states compared below would be the base model's; Table 3's rule (every batch steps, entropy bonus
    # 0.001) makes every update move every weight.
    env = {**os.environ, "AZR_SEED_MAX_ROUNDS": "1", "AZR_EXECUTOR_WORKERS": "1", "AZR_LEARNABILITY_SAMPLES": "2",
           "AZR_RUN_API_PORT": "0", "AZR_CHECKPOINT_EVERY": "3", "AZR_DEVICE": "cpu", "OMP_NUM_THREADS": "1",
           "AZR_SKIP_ZERO_ADVANTAGE_BATCHES": "false", "AZR_ENTROPY_COEF": "0.001"}
    env.pop("AZR_DATABASE_URL", None)
    return subprocess.Popen([sys.executable, "-m", "azr", "run", *SIZES, *args], cwd=cwd, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def recorded(store) -> tuple[int, bool]:
    """(last recorded step, whether the next step's episodes are already in the store)."""
    steps = [record.step for record in store.list_steps(RUN)]
    last = max(steps, default=0)
    _, next_total = store.list_episodes(RUN, step=last + 1, limit=1)
    return last, next_total > 0


def kill_between_update_and_checkpoint(process: subprocess.Popen[str], database: Path, timeout_s: float) -> int:
    """Freeze the run (SIGSTOP) until it is caught with 4+ steps recorded, the last not a multiple of 3 (its update
    pushed, not in a full checkpoint) and the next step's episodes not yet stored; then SIGKILL. Returns the last
    recorded step."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(f"azr run ended before it could be killed: {process.stdout.read()}")
        if database.exists():
            os.kill(process.pid, signal.SIGSTOP)
            try:
                store = open_store(f"sqlite:///{database}")
                try:
                    last, next_started = recorded(store)
                finally:
                    store.close()
            except Exception:  # noqa: BLE001 - the database may be mid-migration or locked: look again later
                last, next_started = 0, True
            if last >= 4 and last % 3 and not next_started:
                os.kill(process.pid, signal.SIGKILL)
                process.wait(30)
                return last
            os.kill(process.pid, signal.SIGCONT)
        time.sleep(0.05)
    raise AssertionError("never caught the run between an update and its full checkpoint")


@pytest.mark.slow
@pytest.mark.precision
def test_sigkilled_run_resumes_to_the_state_of_an_uninterrupted_trainer(tmp_path: Path,
                                                                        author_seed_sample_args: list[str]) -> None:
    torch.set_num_threads(1)
    run_dir = tmp_path / "runs" / RUN
    first = azr_run(tmp_path, "--steps", "40", *author_seed_sample_args)
    try:
        killed_at = kill_between_update_and_checkpoint(first, run_dir / "buffers.sqlite3", 600)
    finally:
        if first.poll() is None:
            first.kill()
            first.wait(30)
    assert first.returncode == -signal.SIGKILL
    last_full = killed_at - killed_at % 3
    assert list_checkpoints(run_dir)[-1].name == f"v{last_full:06d}"

    resumed = azr_run(tmp_path, "--resume", str(run_dir), "--steps", "2")
    output, _ = resumed.communicate(timeout=600)
    assert resumed.returncode == 0, output
    assert f"replaying the updates of steps {last_full + 1}-{killed_at}" in output

    store = open_store(f"sqlite:///{run_dir / 'buffers.sqlite3'}")
    try:
        steps = [record.step for record in store.list_steps(RUN)]
        assert steps == list(range(1, killed_at + 3))
        batches = [sorted(step_episodes(store, RUN, step), key=lambda e: e.id) for step in steps]
    finally:
        store.close()
    settings = saved_settings(run_dir / "settings.json", run_root=tmp_path / "reference", run_id="reference")
    assert settings.trainer.checkpoint_every == 3 and settings.run.device == "cpu"
    with threads_for_updates(settings) as threads:
        reference = fresh_trainer(tiny_model_dir(), settings.trainer)
        for batch in batches:
            reference.trainer.update(batch)
    assert f"torch uses {threads} CPU thread(s)" in output  # the count the reference updated with
    final = restore_trainer(run_dir, settings.trainer)
    assert final is not None and final.trainer.step == reference.trainer.step == len(steps)
    assert final.trainer.policy_version == len(steps)
    assert optimizer_steps(trainer_state(reference)) == {len(steps)}, "every recorded step's update stepped"
    assert_bitwise_equal(trainer_state(final), trainer_state(reference))
