"""LoRA through the real update cycle of the embedded profile (InProcessTrainer on the in-process queue, board,
applied log, local engine and a SQLite store): every update pushes the merged policy to the engine, the full
checkpoint every k holds adapters only, and a process killed after an uncheckpointed update restarts from the base
model plus adapters, brings the engine back to the checkpoint's merged weights and, replaying the lost update from
the store, lands bitwise on the uninterrupted trainer."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
from trainer_states import assert_bitwise_equal, trainer_state

from azr.embedded_trainer import InProcessTrainer, replay_uncommitted_steps
from services.algorithm.task_types import TASK_GROUPS
from services.inference.local_engine import LocalEngine
from services.queues import InProcessAppliedEpisodeLog, InProcessEpisodeQueue, InProcessPolicyVersionBoard
from services.records import Episode
from services.records.updates import StepUpdate
from services.settings import Settings
from services.store import open_store
from trainer_svc.checkpoints import list_checkpoints
from trainer_svc.lora import ADAPTER_WEIGHTS_FILE
from trainer_svc.resume import LoadedPolicy, fresh_trainer, restore_trainer

pytestmark = pytest.mark.precision  # CI runs these again with AZR_CPU_NATIVE_BF16=1

RUN = "lora"
_serial = itertools.count()


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    # One episode per group: every Eq 8 advantage is 0, so with the embedded default (no step without signal) no
    # update would step; every batch steps here (entropy bonus), so each push serves a new policy.
    return Settings(device="cpu", run_root=tmp_path / "runs", run_id=RUN, batch_size=1, checkpoint_every=2,
                    learning_rate=1e-2, lora_rank=4, lora_alpha=8.0, skip_zero_advantage_batches=False,
                    entropy_coef=0.001)


@pytest.fixture
def store(tmp_path: Path) -> Iterator:
    opened = open_store(f"sqlite:///{tmp_path / 'buffers.sqlite3'}", create=True)
    opened.ensure_run(RUN, {})
    yield opened
    opened.close()


def step_episodes(step: int) -> list[Episode]:
    """Six episodes (one per group) of self-play step `step`."""
    g = torch.Generator().manual_seed(step)
    return [Episode(id=f"{RUN}:{step}:{t.value}:{r.value}:{next(_serial)}", run_id=RUN, step=step, task_type=t,
                    role=r, prompt_ids=torch.randint(3, 1000, (5 + k,), generator=g).tolist(),
                    response_ids=torch.randint(3, 1000, (3 + k,), generator=g).tolist(), reward=float(k % 3) - 1.0,
                    policy_version=step - 1) for k, (t, r) in enumerate(TASK_GROUPS)]


def lora_trainer(tiny_dir: Path, settings: Settings) -> LoadedPolicy:
    torch.manual_seed(0)  # the same adapter initialisation for the reference and the run
    return fresh_trainer(tiny_dir, settings.trainer)


class Session:
    """What EmbeddedRun builds around the trainer (the engine starts on `loaded.source`, as `azr run` does)."""

    def __init__(self, loaded: LoadedPolicy, settings: Settings, store) -> None:
        self.queue = InProcessEpisodeQueue(claim_after_s=60)
        self.board = InProcessPolicyVersionBoard()
        self.engine = LocalEngine(loaded.source, device="cpu")
        self.store = store
        self.trainer = InProcessTrainer(loaded=loaded, settings=settings.trainer, rollout=settings.rollout,
                                        settings_record=settings.resolved(), run_dir=settings.run.run_dir,
                                        queue=self.queue, applied_log=InProcessAppliedEpisodeLog(),
                                        engines=[self.engine], board=self.board)
        self.trainer.start()

    def step(self, step: int, episodes: list[Episode]) -> StepUpdate:
        self.store.record_episodes(episodes)
        self.queue.publish(episodes)
        report = self.trainer.update_on(episodes, step)
        self.store.record_step(RUN, step, report.policy_version - 1,
                               {"step": step, "policy_version_after": report.policy_version})
        return report


def test_lora_through_the_embedded_update_cycle_pushes_merged_weights_and_resumes_exactly(
        tiny_dir: Path, settings: Settings, store) -> None:
    steps = {s: step_episodes(s) for s in (1, 2, 3)}
    probe = steps[1][0]
    reference = lora_trainer(tiny_dir, settings.with_values(run_id="reference"))
    for s in (1, 2, 3):
        reference.trainer.update(sorted(steps[s], key=lambda e: e.id))

    first = Session(lora_trainer(tiny_dir, settings), settings, store)
    base_lp = first.engine.forward_logprobs(probe.prompt_ids, probe.response_ids)
    served: dict[int, list[float]] = {}
    for s in (1, 2, 3):
        report = first.step(s, steps[s])
        assert report.policy_version == s and first.engine.weight_version() == str(s)
        assert first.engine.model_info()["model_path"] == str(settings.run.run_dir / "weights" / f"v{s:06d}")
        served[s] = first.engine.forward_logprobs(probe.prompt_ids, probe.response_ids)
    assert served[1] != pytest.approx(base_lp, abs=1e-6), "the engine must serve the adapted policy"
    assert served[2] != pytest.approx(served[1], abs=1e-6)
    [checkpoint] = list_checkpoints(settings.run.run_dir)
    assert checkpoint.name == "v000002" and (checkpoint / ADAPTER_WEIGHTS_FILE).exists()
    assert not list(checkpoint.glob("model*.safetensors")), "adapters only"
    assert first.queue.pending() == 6, "step 3 is not in a full checkpoint: not acknowledged"
    del first  # the process dies with the update of step 3

    restored = restore_trainer(settings.run.run_dir, settings.trainer, model_dir=tiny_dir)
    assert restored is not None and restored.trainer.policy_version == 2 and restored.source == tiny_dir
    second = Session(restored, settings, store)  # the engine starts on the base, then gets the merged v2
    assert second.engine.weight_version() == "2"
    assert second.engine.forward_logprobs(probe.prompt_ids, probe.response_ids) == served[2]
    said: list[str] = []
    assert replay_uncommitted_steps(store, RUN, second.trainer, second.queue, said.append) == [3]
    assert second.engine.weight_version() == "3"
    assert second.engine.forward_logprobs(probe.prompt_ids, probe.response_ids) == served[3]
    assert second.trainer.finish().endswith("v000003") and second.queue.pending() == 0
    assert_bitwise_equal(trainer_state(restored), trainer_state(reference))
