"""`azr trainer` as a real process on real Redis: SIGKILLed mid-batch, or between an update and its full checkpoint,
restarted: no episode lost or applied twice, and the resumed state is the uninterrupted one."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
import redis
from trainer_episodes import six_group_batch
from trainer_processes import redis_trainer_env
from trainer_states import (
    assert_bitwise_equal,
    optimizer_steps,
    saved_settings,
    threads_for_updates,
    trainer_state,
)
from transformers import AutoTokenizer

from services.queues import RedisEpisodeQueue
from trainer_svc.checkpoints import latest_checkpoint, list_checkpoints, load_trainer_state
from trainer_svc.resume import fresh_trainer, restore_trainer

AZR = [sys.executable, "-m", "azr"]


def wait_for(condition, timeout_s: float, what: str, proc: subprocess.Popen) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return
        if proc.poll() is not None:
            raise AssertionError(f"trainer exited ({proc.returncode}) before {what}: {proc.stdout.read()}")
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.mark.slow
def test_sigkilled_trainer_loses_no_episode_and_applies_none_twice(redis_url: str, tiny_dir: Path,
                                                                   tmp_path: Path) -> None:
    run_id = f"trainer-test-{uuid.uuid4().hex[:12]}"
    client = redis.Redis.from_url(redis_url)
    queue = RedisEpisodeQueue(client, run_id, claim_after_s=1.0)
    env = redis_trainer_env(tmp_path, redis_url, AZR_EPISODE_CLAIM_AFTER_S="1.0")
    command = AZR + ["trainer", "--run-id", run_id, "--model", str(tiny_dir), "--no-push", "--block-s", "0.2"]
    run_dir = tmp_path / "runs" / run_id
    tokenizer = AutoTokenizer.from_pretrained(tiny_dir)
    batch1 = six_group_batch(tokenizer, 1)
    batch2 = six_group_batch(tokenizer, 1)
    try:
        queue.publish(batch1)
        first = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        try:
            wait_for(lambda: queue.pending() == 0 and queue.depth() == 0 and latest_checkpoint(run_dir) is not None,
                     120, "the first batch to be checkpointed and acknowledged", first)
            queue.publish(batch2[:3])  # half a batch: the trainer holds it, unacknowledged
            wait_for(lambda: queue.pending() == 3, 60, "the trainer to read half of batch 2", first)
            first.send_signal(signal.SIGKILL)
            first.wait(30)
        finally:
            if first.poll() is None:
                first.kill()
        assert first.returncode == -signal.SIGKILL
        assert [p.name for p in list_checkpoints(run_dir)] == ["v000001"]

        queue.publish(batch2[3:])
        second = subprocess.run(command + ["--max-updates", "1"], env=env, capture_output=True, text=True,
                                timeout=180)
        assert second.returncode == 0, second.stdout + second.stderr
        assert "from checkpoint" in second.stdout and "step 2, policy version 2" in second.stdout
        assert [p.name for p in list_checkpoints(run_dir)] == ["v000001", "v000002"]
        applied1 = load_trainer_state(run_dir / "checkpoints" / "v000001").applied_episode_ids
        applied2 = load_trainer_state(run_dir / "checkpoints" / "v000002").applied_episode_ids
        assert sorted(applied1) == sorted(e.id for e in batch1)
        assert sorted(applied2) == sorted(e.id for e in batch2), "the held half batch was redelivered and applied"
        assert queue.pending() == 0 and queue.depth() == 0
        assert int(client.get(f"azr:{run_id}:policy_version")) == 2
    finally:
        keys = list(client.scan_iter(match=f"azr:{run_id}:*"))
        if keys:
            client.delete(*keys)


@pytest.mark.slow
@pytest.mark.precision
def test_sigkill_between_an_update_and_its_full_checkpoint_resumes_bitwise(redis_url: str, tiny_dir: Path,
                                                                          tmp_path: Path) -> None:
    """k = 3: five updates (v3 is the last full checkpoint; 4 and 5 pushed and published only), SIGKILL, restart.
    The restarted trainer rewinds the published version to 3, gets batches 4 and 5 again (never acknowledged),
    applies them on the restored state, then batch 6: weights and AdamW moments bitwise those of a trainer that ran
    the six batches without interruption (same CPU kernels, same settings as the process saved them, the thread
    count its updates used, same batches in the same order: the update is deterministic, so anything lost or
    applied twice would show)."""
    run_id = f"trainer-test-{uuid.uuid4().hex[:12]}"
    client = redis.Redis.from_url(redis_url)
    queue = RedisEpisodeQueue(client, run_id, claim_after_s=1.0)
    env = redis_trainer_env(tmp_path, redis_url, AZR_EPISODE_CLAIM_AFTER_S="1.0", AZR_CHECKPOINT_EVERY="3",
                            OMP_NUM_THREADS="1")
    command = AZR + ["trainer", "--run-id", run_id, "--model", str(tiny_dir), "--no-push", "--block-s", "0.2"]
    run_dir = tmp_path / "runs" / run_id
    version_key = f"azr:{run_id}:policy_version"
    tokenizer = AutoTokenizer.from_pretrained(tiny_dir)
    batches = [six_group_batch(tokenizer, 1) for _ in range(6)]
    try:
        queue.publish([e for batch in batches[:5] for e in batch])
        first = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        try:
            wait_for(lambda: int(client.get(version_key) or 0) == 5, 180, "the fifth update to be published", first)
            first.send_signal(signal.SIGKILL)
            first.wait(30)
        finally:
            if first.poll() is None:
                first.kill()
        assert first.returncode == -signal.SIGKILL
        assert [p.name for p in list_checkpoints(run_dir)] == ["v000003"]
        assert queue.pending() == 12, "batches 4 and 5 were applied and pushed, never acknowledged"

        queue.publish(batches[5])
        second = subprocess.run(command + ["--max-updates", "3"], env=env, capture_output=True, text=True,
                                timeout=300)
        assert second.returncode == 0, second.stdout + second.stderr
        assert "from checkpoint" in second.stdout and "step 3, policy version 3" in second.stdout
        assert "rewinding to version 3" in second.stderr
        assert "step 6, policy version 6" in second.stdout and "duplicates 0" in second.stdout
        assert [p.name for p in list_checkpoints(run_dir)] == ["v000003", "v000006"]
        applied = load_trainer_state(run_dir / "checkpoints" / "v000006").applied_episode_ids
        assert sorted(applied) == sorted(e.id for batch in batches[3:] for e in batch)
        assert queue.pending() == 0 and queue.depth() == 0 and int(client.get(version_key)) == 6
        settings = saved_settings(run_dir / "checkpoints" / "v000006" / "settings.json",
                                  run_root=tmp_path / "reference", run_id="reference")
        assert (settings.run.profile, settings.run.device,
                settings.trainer.checkpoint_every) == ("distributed", "cpu", 3)
        with threads_for_updates(settings):
            reference = fresh_trainer(tiny_dir, settings.trainer)
            for batch in batches:
                reference.trainer.update(batch)
        resumed = restore_trainer(run_dir, settings.trainer)
        assert resumed is not None and resumed.trainer.step == reference.trainer.step == 6
        assert optimizer_steps(trainer_state(reference)) == {6}, "every batch's update stepped"
        assert_bitwise_equal(trainer_state(resumed), trainer_state(reference))
    finally:
        keys = list(client.scan_iter(match=f"azr:{run_id}:*"))
        if keys:
            client.delete(*keys)
