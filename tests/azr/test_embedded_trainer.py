"""The embedded profile's trainer (InProcessTrainer) on the real in-process queue, applied log, board, local engine
and a real SQLite store: it follows the distributed trainer's rule (acknowledge and mark applied only once the full
checkpoint holding the update is durable), and a resumed run makes again, from the store, the updates that died
with the process, so the state is bitwise the uninterrupted one."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
from trainer_states import assert_bitwise_equal, optimizer_steps, trainer_state

from azr.embedded_trainer import InProcessTrainer, replay_uncommitted_steps, uncommitted_steps
from services.algorithm.task_types import TASK_GROUPS
from services.inference.local_engine import LocalEngine
from services.inference.tiny_model import tiny_model_dir
from services.queues import InProcessAppliedEpisodeLog, InProcessEpisodeQueue, InProcessPolicyVersionBoard
from services.records import Episode
from services.records.updates import StepUpdate
from services.settings import Settings
from services.store import open_store
from trainer_svc.checkpoints import list_checkpoints
from trainer_svc.resume import LoadedPolicy, fresh_trainer, restore_trainer

pytestmark = pytest.mark.precision  # CI runs these again with AZR_CPU_NATIVE_BF16=1

RUN = "emb"
_serial = itertools.count()


@pytest.fixture(autouse=True)
def _one_thread() -> None:
    torch.set_num_threads(1)


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    # One episode per group: every Eq 8 advantage is 0, so with the embedded default (no step without signal) no
    # update would step and the resumed state would equal the uninterrupted one trivially; every batch steps here.
    return Settings(device="cpu", run_root=tmp_path / "runs", run_id=RUN, batch_size=1, checkpoint_every=3,
                    learning_rate=1e-3, skip_zero_advantage_batches=False, entropy_coef=0.001)


def step_episodes(step: int) -> list[Episode]:
    """Six episodes (one per group) of self-play step `step`, ids as the coordinator makes them unique per step."""
    g = torch.Generator().manual_seed(step)
    return [Episode(id=f"{RUN}:{step}:{t.value}:{r.value}:{next(_serial)}", run_id=RUN, step=step, task_type=t,
                    role=r, prompt_ids=torch.randint(3, 1000, (5 + k,), generator=g).tolist(),
                    response_ids=torch.randint(3, 1000, (3 + k,), generator=g).tolist(), reward=float(k % 3) - 1.0,
                    policy_version=step - 1) for k, (t, r) in enumerate(TASK_GROUPS)]


class Session:
    """What EmbeddedRun builds around the trainer: queue, board, applied log, engine, store; `step` records a step
    as the self-play loop does (episodes first, the update, then the step line with its policy_version_after)."""

    def __init__(self, loaded: LoadedPolicy, settings: Settings, store) -> None:
        self.queue = InProcessEpisodeQueue(claim_after_s=60)
        self.board = InProcessPolicyVersionBoard()
        self.applied = InProcessAppliedEpisodeLog()
        self.engine = LocalEngine(loaded.source, device="cpu")
        self.store = store
        self.trainer = InProcessTrainer(loaded=loaded, settings=settings.trainer, rollout=settings.rollout,
                                        settings_record=settings.resolved(), run_dir=settings.run.run_dir,
                                        queue=self.queue, applied_log=self.applied, engines=[self.engine],
                                        board=self.board)
        self.trainer.start()

    def step(self, step: int, episodes: list[Episode]) -> StepUpdate:
        self.store.record_episodes(episodes)
        self.queue.publish(episodes)
        report = self.trainer.update_on(episodes, step)
        self.store.record_step(RUN, step, report.policy_version - 1,
                               {"step": step, "policy_version_after": report.policy_version})
        return report


@pytest.fixture
def store(tmp_path: Path) -> Iterator:
    opened = open_store(f"sqlite:///{tmp_path / 'buffers.sqlite3'}", create=True)
    opened.ensure_run(RUN, {})
    yield opened
    opened.close()


def test_episodes_are_acknowledged_and_marked_applied_only_with_their_full_checkpoint(settings: Settings,
                                                                                      store) -> None:
    session = Session(fresh_trainer(tiny_model_dir(), settings.trainer), settings, store)
    steps = {s: step_episodes(s) for s in (1, 2, 3)}
    for s in (1, 2):
        report = session.step(s, steps[s])
        assert report.policy_version == s and session.engine.weight_version() == str(s)
        assert report.checkpoint is None and list_checkpoints(settings.run.run_dir) == []
        assert session.queue.pending() == 6 * s, "not in a full checkpoint yet: not acknowledged"
        assert not any(session.applied.was_applied(e) for e in steps[s]), "nor marked applied"
    report = session.step(3, steps[3])
    assert report.checkpoint.endswith("v000003") and session.queue.pending() == 0
    assert all(session.applied.was_applied(e) for s in steps for e in steps[s])


def test_a_resumed_run_replays_the_uncommitted_steps_and_lands_on_the_uninterrupted_state(settings: Settings, store,
                                                                                         tmp_path: Path) -> None:
    steps = {s: step_episodes(s) for s in range(1, 7)}
    reference = fresh_trainer(tiny_model_dir(), settings.with_values(run_id="reference").trainer)
    for s in range(1, 7):
        reference.trainer.update(sorted(steps[s], key=lambda e: e.id))

    first = Session(fresh_trainer(tiny_model_dir(), settings.trainer), settings, store)
    for s in range(1, 6):
        first.step(s, steps[s])
    assert [p.name for p in list_checkpoints(settings.run.run_dir)] == ["v000003"]
    del first  # the process dies: its queue, and the updates of steps 4 and 5, with it

    restored = restore_trainer(settings.run.run_dir, settings.trainer)
    assert restored is not None and restored.trainer.policy_version == 3
    second = Session(restored, settings, store)
    assert uncommitted_steps(store, RUN, 3) == [4, 5]
    said: list[str] = []
    assert replay_uncommitted_steps(store, RUN, second.trainer, second.queue, said.append) == [4, 5]
    assert "steps 4-5" in said[0] and second.board.current() == 5 and second.engine.weight_version() == "5"
    second.step(6, steps[6])
    assert [p.name for p in list_checkpoints(settings.run.run_dir)] == ["v000003", "v000006"]
    assert second.queue.pending() == 0 and second.trainer.service.counters.duplicates_skipped == 0
    assert optimizer_steps(trainer_state(reference)) == {6}, "every step's update stepped"
    assert_bitwise_equal(trainer_state(restored), trainer_state(reference))
