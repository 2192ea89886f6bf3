"""The trainer loop on the real in-process queue, applied log, policy board and local inference engine: bf16 weights
pushed every update, the full checkpoint every k, acknowledgement only after it, and a restart from it that redoes
exactly the updates it did not hold."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
import torch
from safetensors import safe_open
from trainer_episodes import episode, six_group_batch
from trainer_states import assert_bitwise_equal, trainer_state

from services.inference.local_engine import LocalEngine
from services.queues import InProcessAppliedEpisodeLog, InProcessEpisodeQueue, InProcessPolicyVersionBoard
from services.settings import Settings
from trainer_svc.checkpoints import list_checkpoints, load_trainer_state
from trainer_svc.resume import fresh_trainer, restore_trainer
from trainer_svc.service import METRICS_FILE, TrainerService
from trainer_svc.weight_export import list_pushed_weights


def service_for(loaded, settings: Settings, queue, *, engines=(), board=None, log=None) -> TrainerService:
    return TrainerService(loaded=loaded, settings=settings.trainer, rollout=settings.rollout,
                          settings_record=settings.resolved(), queue=queue,
                          applied_log=log or InProcessAppliedEpisodeLog(), run_dir=settings.run.run_dir,
                          engines=engines, board=board, read_count=7)


def run_until_update(service: TrainerService, max_polls: int = 50):
    for _ in range(max_polls):
        report = service.step(block_s=0.05)
        if report is not None:
            return report
    raise AssertionError(f"no batch after {max_polls} polls; waiting: {service.pool.counts()}")


def test_a_batch_is_trained_checkpointed_pushed_published_then_acknowledged(tiny_dir: Path, cpu_settings: Settings
                                                                            ) -> None:
    settings = cpu_settings.with_values(batch_size=2)
    loaded = fresh_trainer(tiny_dir, settings.trainer)
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
    assert [p.name for p in list_checkpoints(settings.run.run_dir)] == ["v000001"]
    assert engine.weight_version() == "1" and board.current() == 1
    assert engine.model_info()["model_path"] == str(settings.run.run_dir / "weights" / "v000001")
    after = engine.forward_logprobs(probe.prompt_ids, probe.response_ids)
    assert after != pytest.approx(before, abs=1e-6), "the engine must serve the updated weights"
    # the 12 trained on are acknowledged; the 3 extras wait, read into the pool (pending) or still queued
    assert queue.pending() + queue.depth() == 3 and queue.pending() == len(service.pool)
    state = load_trainer_state(settings.run.run_dir / "checkpoints" / "v000001")
    assert sorted(state.applied_episode_ids) == sorted(e.id for e in batch)
    line = json.loads((settings.run.run_dir / METRICS_FILE).read_text().splitlines()[0])
    assert line["step"] == 1 and line["published_version"] == 1 and line["checkpoint"].endswith("v000001")
    assert line["weights"].endswith("weights/v000001")


def test_bf16_weights_are_pushed_every_update_and_the_full_checkpoint_written_every_k(tiny_dir: Path,
                                                                                      cpu_settings: Settings) -> None:
    settings = cpu_settings.with_values(batch_size=1, checkpoint_every=3, max_staleness=5)
    loaded = fresh_trainer(tiny_dir, settings.trainer)
    engine = LocalEngine(tiny_dir, device="cpu")
    board = InProcessPolicyVersionBoard()
    queue = InProcessEpisodeQueue(claim_after_s=60)
    service = service_for(loaded, settings, queue, engines=[engine], board=board)
    service.start()
    for version in (1, 2, 3):
        queue.publish(six_group_batch(loaded.tokenizer, 1))
        run_until_update(service)
        assert engine.weight_version() == str(version) and board.current() == version
        pushed = settings.run.run_dir / "weights" / f"v{version:06d}"
        assert engine.model_info()["model_path"] == str(pushed)
        with safe_open(str(pushed / "model.safetensors"), "pt") as weights:
            assert {weights.get_tensor(k).dtype for k in weights.keys()} == {torch.bfloat16}
        assert json.loads((pushed / "config.json").read_text())["dtype"] == "bfloat16"
        assert not (pushed / "trainer_state.pt").exists()
        if version < 3:  # weights only: no full checkpoint yet, nothing acknowledged
            assert list_checkpoints(settings.run.run_dir) == [] and queue.pending() == 6 * version
    assert [p.name for p in list_checkpoints(settings.run.run_dir)] == ["v000003"]
    assert [p.name for p in list_pushed_weights(settings.run.run_dir)] == ["v000002", "v000003"]
    assert queue.pending() == 0 and service.counters.pushes == 3 and service.counters.checkpoints == 1
    assert len(load_trainer_state(settings.run.run_dir / "checkpoints" / "v000003").applied_episode_ids) == 18
    full = (settings.run.run_dir / "checkpoints" / "v000003" / "model.safetensors").stat().st_size
    served = (settings.run.run_dir / "weights" / "v000003" / "model.safetensors").stat().st_size
    assert served < 0.55 * full  # bf16 against fp32


def test_a_restart_from_the_last_full_checkpoint_redoes_exactly_the_updates_it_lacks(tiny_dir: Path,
                                                                                     cpu_settings: Settings) -> None:
    """Five updates with k = 3, the trainer dropped without a word after the fifth (as a kill would), a new one
    restored from v3: the board is rewound from 5 to 3, batches 4 and 5 come back and are applied once, and after
    batch 6 the state is bitwise the uninterrupted trainer's."""
    settings = cpu_settings.with_values(batch_size=1, checkpoint_every=3, max_staleness=10)
    tokenizer = fresh_trainer(tiny_dir, settings.trainer).tokenizer
    batches = [six_group_batch(tokenizer, 1) for _ in range(6)]
    reference = fresh_trainer(tiny_dir, settings.with_values(run_id="reference").trainer)
    for batch in batches:
        reference.trainer.update(batch)

    board, log = InProcessPolicyVersionBoard(), InProcessAppliedEpisodeLog()
    queue = InProcessEpisodeQueue(claim_after_s=0.2)
    first = service_for(fresh_trainer(tiny_dir, settings.trainer), settings, queue, board=board, log=log)
    first.start()
    for batch in batches[:5]:
        queue.publish(batch)
        run_until_update(first)
    assert board.current() == 5 and [p.name for p in list_checkpoints(settings.run.run_dir)] == ["v000003"]
    assert queue.pending() == 12  # batches 4 and 5: applied, pushed, never acknowledged
    del first  # killed: its updates 4 and 5 are gone with it

    restored = restore_trainer(settings.run.run_dir, settings.trainer)
    assert restored is not None and (restored.trainer.step, restored.trainer.policy_version) == (3, 3)
    second = service_for(restored, settings, queue, board=board, log=log)
    second.start()
    assert board.current() == 3, "versions 4 and 5 were never checkpointed: the board goes back to 3"
    assert [p.name for p in list_pushed_weights(settings.run.run_dir)] == ["v000003"]  # 4 and 5 will be made anew
    time.sleep(0.25)  # past the claim timeout: the queue hands batches 4 and 5 out again
    run_until_update(second)
    run_until_update(second)
    queue.publish(batches[5])
    run_until_update(second)
    assert second.counters.duplicates_skipped == 0 and second.counters.updates == 3
    assert (restored.trainer.step, restored.trainer.policy_version, board.current()) == (6, 6, 6)
    assert queue.pending() == 0 and queue.depth() == 0
    assert sorted(load_trainer_state(settings.run.run_dir / "checkpoints" / "v000006").applied_episode_ids) == \
        sorted(e.id for batch in batches[3:] for e in batch)
    assert_bitwise_equal(trainer_state(restored), trainer_state(reference))


def test_episodes_of_a_checkpoint_whose_ack_was_lost_are_not_applied_again(tiny_dir: Path, cpu_settings: Settings
                                                                          ) -> None:
    settings = cpu_settings.with_values(batch_size=1, checkpoint_every=2)
    loaded = fresh_trainer(tiny_dir, settings.trainer)
    queue = InProcessEpisodeQueue(claim_after_s=0.3)
    batch = six_group_batch(loaded.tokenizer, 1)
    queue.publish(batch)
    crashing = service_for(loaded, settings, queue)
    run_until_update(crashing)
    crashing.cycle.checkpoint()  # the full checkpoint is durable; the trainer dies before marking and acknowledging
    assert [p.name for p in list_checkpoints(settings.run.run_dir)] == ["v000001"] and queue.pending() == 6

    restored = restore_trainer(settings.run.run_dir, settings.trainer)
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
    settings = cpu_settings.with_values(batch_size=1, max_staleness=0)
    loaded = fresh_trainer(tiny_dir, settings.trainer)
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
    assert {e.id for e in fresh} == set(load_trainer_state(settings.run.run_dir / "checkpoints" / "v000002")
                                        .applied_episode_ids)
    assert queue.pending() == 0


def test_a_redelivery_while_waiting_is_folded_into_the_same_episode(tiny_dir: Path, cpu_settings: Settings) -> None:
    settings = cpu_settings.with_values(batch_size=1)
    loaded = fresh_trainer(tiny_dir, settings.trainer)
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


def test_every_update_line_also_reaches_tensorboard(tiny_dir: Path, cpu_settings: Settings) -> None:
    """The trainer's lines (distributed profile: the coordinator's carry no update figures) as TensorBoard scalars,
    keys prefixed `trainer/`, step = the trainer's step, equal to what trainer_metrics.jsonl holds."""
    from tensorboard_events import read_scalars

    from services.reporting.metric_sinks import TensorBoardSink

    settings = cpu_settings.with_values(batch_size=1)
    loaded = fresh_trainer(tiny_dir, settings.trainer)
    queue = InProcessEpisodeQueue(claim_after_s=60)
    queue.publish(six_group_batch(loaded.tokenizer, 1) + six_group_batch(loaded.tokenizer, 1))
    sink = TensorBoardSink(settings.run.run_dir / "tensorboard")
    service = TrainerService(loaded=loaded, settings=settings.trainer, rollout=settings.rollout,
                             settings_record=settings.resolved(), queue=queue, applied_log=InProcessAppliedEpisodeLog(),
                             run_dir=settings.run.run_dir, read_count=7, sinks=[sink])
    first, second = run_until_update(service), run_until_update(service)
    sink.close()
    lines = [json.loads(line) for line in (settings.run.run_dir / METRICS_FILE).read_text().splitlines()]
    scalars = read_scalars(settings.run.run_dir / "tensorboard")
    assert scalars["trainer/loss"] == {first.step: pytest.approx(lines[0]["loss"]),
                                       second.step: pytest.approx(lines[1]["loss"])}
    assert scalars["trainer/published_version"] == {1: 1.0, 2: 2.0}
    assert "trainer/weights" not in scalars  # text values stay in the JSONL


def test_train_on_takes_one_steps_episodes_through_the_same_rules(tiny_dir: Path, cpu_settings: Settings) -> None:
    """The embedded profile's step-synchronous update goes through the distributed loop's rules: a group short of B
    still trains, a malformed episode is rejected and acknowledged, an episode of an applied id is not trained
    twice, and episodes outside the step wait in the pool for their own step."""
    settings = cpu_settings.with_values(batch_size=2)
    loaded = fresh_trainer(tiny_dir, settings.trainer)
    queue = InProcessEpisodeQueue(claim_after_s=60)
    service = service_for(loaded, settings, queue)
    step1 = six_group_batch(loaded.tokenizer, 1)  # one per group: short of B = 2
    bad = episode([1, 2], [3, 4], 0.5, behaviour_logprobs=[0.1])  # one logprob for two tokens: rejected
    later = six_group_batch(loaded.tokenizer, 1)[:2]  # the next step's, published early
    queue.publish(step1 + [bad] + later)
    report = service.train_on({e.id for e in step1} | {bad.id})
    assert report is not None and report.episodes == 6 and service.counters.rejected == 1
    assert later[0].id in service.pool and later[1].id in service.pool
    queue.publish([step1[0]])  # the same episode again (a redelivery after the update)
    assert service.train_on({step1[0].id}) is None and service.counters.duplicates_skipped == 1
    with pytest.raises(RuntimeError, match="handed out 0 of the 1"):
        service.train_on({"never-published"})
