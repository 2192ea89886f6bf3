"""`azr trainer` as a real process on real Redis: SIGKILLed mid-batch, restarted, no episode lost or applied twice."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
import redis
from transformers import AutoTokenizer

from services.queues import RedisEpisodeQueue
from trainer_svc.checkpoints import latest_checkpoint, list_checkpoints, load_trainer_state
from trainer_episodes import six_group_batch
from trainer_processes import redis_trainer_env

AZR = [sys.executable, "-m", "services"]


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
