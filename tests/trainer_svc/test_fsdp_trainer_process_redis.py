"""`torchrun --nproc_per_node 2 -m azr trainer` (FSDP, gloo on CPU) on real Redis: two batches consumed,
checkpoints v1 and v2 written once by rank 0, policy version 2 published, every delivery acknowledged; a second
launch resumes on both ranks from v2 and publishes version 3."""

from __future__ import annotations

import sys
import uuid
from pathlib import Path

import pytest
import redis
from process_groups import run_process_group
from trainer_episodes import six_group_batch
from trainer_processes import redis_trainer_env
from transformers import AutoModelForCausalLM, AutoTokenizer

from services.queues import RedisEpisodeQueue
from trainer_svc.checkpoints import list_checkpoints, load_trainer_state
from trainer_svc.optimizer_layout import BY_NAME


def torchrun_trainer(run_id: str, tiny_dir: Path, max_updates: int, env: dict[str, str]) -> str:
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
               "-m", "azr", "trainer", "--run-id", run_id, "--model", str(tiny_dir), "--no-push",
               "--block-s", "0.2", "--max-updates", str(max_updates)]
    result = run_process_group(command, timeout=300, env=env)  # a timeout ends the ranks too
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-8000:]
    return result.stdout


@pytest.mark.slow
def test_two_rank_trainer_consumes_batches_publishes_versions_and_resumes(redis_url: str, tiny_dir: Path,
                                                                          tmp_path: Path) -> None:
    run_id = f"fsdp-test-{uuid.uuid4().hex[:12]}"
    client = redis.Redis.from_url(redis_url)
    queue = RedisEpisodeQueue(client, run_id, claim_after_s=30.0)
    env = redis_trainer_env(tmp_path, redis_url, AZR_MICRO_BATCH_SIZE="1", OMP_NUM_THREADS="1")
    run_dir = tmp_path / "runs" / run_id
    tokenizer = AutoTokenizer.from_pretrained(tiny_dir)
    batches = [six_group_batch(tokenizer, 1) for _ in range(3)]
    try:
        queue.publish(batches[0] + batches[1])
        first = torchrun_trainer(run_id, tiny_dir, 2, env)
        assert "FSDP over 2 ranks on cpu" in first and "from base model" in first
        assert "trainer stopped after 2 updates: step 2, policy version 2" in first
        assert [p.name for p in list_checkpoints(run_dir)] == ["v000001", "v000002"]
        assert int(client.get(f"azr:{run_id}:policy_version")) == 2
        assert queue.pending() == 0 and queue.depth() == 0
        state = load_trainer_state(run_dir / "checkpoints" / "v000002")
        assert state.optimizer_layout == BY_NAME and state.optimizer["state"]
        assert sorted(state.applied_episode_ids) == sorted(e.id for e in batches[1])
        model = AutoModelForCausalLM.from_pretrained(run_dir / "checkpoints" / "v000002", local_files_only=True)
        assert model.config.architectures == ["Qwen2ForCausalLM"]

        queue.publish(batches[2])
        second = torchrun_trainer(run_id, tiny_dir, 1, env)
        assert "from checkpoint" in second and "step 2, policy version 2, FSDP over 2 ranks" in second
        assert "trainer stopped after 1 updates: step 3, policy version 3" in second
        assert [p.name for p in list_checkpoints(run_dir)] == ["v000001", "v000002", "v000003"]
        assert int(client.get(f"azr:{run_id}:policy_version")) == 3
        assert queue.pending() == 0 and queue.depth() == 0
    finally:
        keys = list(client.scan_iter(match=f"azr:{run_id}:*"))
        if keys:
            client.delete(*keys)
