"""The trainer loop on the real in-process queue, applied log, policy board and local inference engine."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
import torch

from services.inference.local_engine import LocalEngine
from services.inference.sglang_client import SGLangClient
from services.ports import InferenceError
from services.queues import InProcessAppliedEpisodeLog, InProcessEpisodeQueue, InProcessPolicyVersionBoard
from services.settings import Settings
from trainer_svc.checkpoints import list_checkpoints, load_trainer_state
from trainer_svc.resume import fresh_trainer, restore_trainer
from trainer_svc.service import METRICS_FILE, TrainerService
from trainer_episodes import episode, six_group_batch


def service_for(loaded, settings: Settings, queue, *, engines=(), board=None, log=None) -> TrainerService:
    return TrainerService(loaded=loaded, settings=settings, queue=queue, applied_log=log or InProcessAppliedEpisodeLog(),
                          run_dir=settings.run_dir, engines=engines, publish=board.publish if board else None,
                          read_count=7)


def run_until_update(service: TrainerService, max_polls: int = 50):
    for _ in range(max_polls):
        report = service.step(block_s=0.05)
        if report is not None:
            return report
    raise AssertionError(f"no batch after {max_polls} polls; waiting: {service.pool.counts()}")


def test_a_batch_is_trained_checkpointed_pushed_published_then_acknowledged(tiny_dir: Path, cpu_settings: Settings
                                                                            ) -> None:
    settings = cpu_settings.model_copy(update={"batch_size": 2})
    loaded = fresh_trainer(tiny_dir, settings)
    engine = LocalEngine(tiny_dir, device="cpu")
    board = InProcessPolicyVersionBoard()
    queue = InProcessEpisodeQueue(claim_after_s=60)
    batch = six_group_batch(loaded.tokenizer, 2)
    extra = six_group_batch(loaded.tokenizer, 1)[:3]  # three groups get a third episode: they wait
    queue.publish(batch + extra)
    probe = batch[0]
    before = engine.forward_logprobs(probe.prompt_ids, probe.response_ids)

    service = service_for(loaded, settings, queue, engines=[engine], board=board)
    report = run_until_update(service)
    assert sorted(g.count for g in report.groups) == [2] * 6 and report.episodes == 12
    assert [p.name for p in list_checkpoints(settings.run_dir)] == ["v000001"]
    assert engine.weight_version() == "1" and board.current() == 1
    after = engine.forward_logprobs(probe.prompt_ids, probe.response_ids)
    assert after != pytest.approx(before, abs=1e-6), "the engine must serve the updated weights"
    # the 12 trained on are acknowledged; the 3 extras wait, read into the pool (pending) or still queued
    assert queue.pending() + queue.depth() == 3 and queue.pending() == len(service.pool)
    state = load_trainer_state(settings.run_dir / "checkpoints" / "v000001")
    assert sorted(state.applied_episode_ids) == sorted(e.id for e in batch)
    line = json.loads((settings.run_dir / METRICS_FILE).read_text().splitlines()[0])
    assert line["step"] == 1 and line["published_version"] == 1 and line["checkpoint"].endswith("v000001")


def test_acknowledgement_waits_for_the_checkpoint(tiny_dir: Path, cpu_settings: Settings) -> None:
    settings = cpu_settings.model_copy(update={"batch_size": 1, "checkpoint_every": 2, "max_staleness": 5})
    loaded = fresh_trainer(tiny_dir, settings)
    queue = InProcessEpisodeQueue(claim_after_s=60)
    queue.publish(six_group_batch(loaded.tokenizer, 1) + six_group_batch(loaded.tokenizer, 1))
    service = service_for(loaded, settings, queue)
    run_until_update(service)
    assert list_checkpoints(settings.run_dir) == []
    assert queue.pending() == 6 + len(service.pool), "not durable yet: the trained-on six are not acknowledged"
    run_until_update(service)
    assert [p.name for p in list_checkpoints(settings.run_dir)] == ["v000001"]
    assert queue.pending() == 0 and loaded.trainer.step == 2 and loaded.trainer.policy_version == 1


def test_episodes_of_a_checkpoint_whose_ack_was_lost_are_not_applied_again(tiny_dir: Path, cpu_settings: Settings
                                                                          ) -> None:
    settings = cpu_settings.model_copy(update={"batch_size": 1})
    loaded = fresh_trainer(tiny_dir, settings)
    queue = InProcessEpisodeQueue(claim_after_s=0.3)
    batch = six_group_batch(loaded.tokenizer, 1)
    queue.publish(batch)
    dead_server = SGLangClient(["http://127.0.0.1:9"], tiny_dir, timeout=1.0, retries=1, backoff_s=0.0)
    crashing = service_for(loaded, settings, queue, engines=[dead_server])
    with pytest.raises(InferenceError):  # checkpoint written, push failed: the trainer dies before the ack
        run_until_update(crashing)
    assert [p.name for p in list_checkpoints(settings.run_dir)] == ["v000001"] and queue.pending() == 6

    restored = restore_trainer(settings.run_dir, settings)
    assert restored is not None and restored.trainer.step == 1
    engine = LocalEngine(tiny_dir, device="cpu")
    board = InProcessPolicyVersionBoard()
    log = InProcessAppliedEpisodeLog()
    service = service_for(restored, settings, queue, engines=[engine], board=board, log=log)
    service.start()  # re-push the restored checkpoint
    assert engine.weight_version() == "1" and board.current() == 1
    time.sleep(0.35)
    for _ in range(10):
        assert service.step(block_s=0.05) is None
    assert service.counters.duplicates_skipped == 6 and service.counters.updates == 0
    assert queue.pending() == 0 and restored.trainer.step == 1
    assert all(log.was_applied(e) for e in batch)


def test_stale_and_malformed_episodes_are_dropped_counted_and_acknowledged(tiny_dir: Path, cpu_settings: Settings
                                                                          ) -> None:
    settings = cpu_settings.model_copy(update={"batch_size": 1, "max_staleness": 0})
    loaded = fresh_trainer(tiny_dir, settings)
    queue = InProcessEpisodeQueue(claim_after_s=60)
    queue.publish(six_group_batch(loaded.tokenizer, 1, policy_version=0))
    service = service_for(loaded, settings, queue)
    run_until_update(service)  # now at policy version 1
    old = six_group_batch(loaded.tokenizer, 1, policy_version=0)
    bad = episode([1, 2], [10**6], 0.0, policy_version=1)  # token id outside the vocabulary
    fresh = six_group_batch(loaded.tokenizer, 1, policy_version=1)
    queue.publish(old + [bad] + fresh)
    report = run_until_update(service)
    assert report.stale_dropped == 6 and service.counters.stale_dropped == 6
    assert service.counters.rejected == 1
    assert {e.id for e in fresh} == set(load_trainer_state(settings.run_dir / "checkpoints" / "v000002")
                                        .applied_episode_ids)
    assert queue.pending() == 0


def test_a_redelivery_while_waiting_is_folded_into_the_same_episode(tiny_dir: Path, cpu_settings: Settings) -> None:
    settings = cpu_settings.model_copy(update={"batch_size": 1})
    loaded = fresh_trainer(tiny_dir, settings)
    queue = InProcessEpisodeQueue(claim_after_s=0.2)
    batch = six_group_batch(loaded.tokenizer, 1)
    queue.publish(batch[:3])
    service = service_for(loaded, settings, queue)
    assert service.step(block_s=0.05) is None
    time.sleep(0.25)  # held past the claim timeout: the queue hands the three out again
    assert service.step(block_s=0.05) is None
    assert len(service.pool) == 3 and service.counters.read == 6
    queue.publish(batch[3:])
    report = run_until_update(service)
    assert report.episodes == 6 and queue.pending() == 0
