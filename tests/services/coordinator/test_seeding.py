"""Buffer initialisation (§3.3.1) with the real executor and store: D_abd = D_ded to B×S, then D_ind; bounded."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Iterator

import pytest
from scripted_engine import ScriptedEngine
from test_step import SCRIPTS

from executor_svc.executor import Executor
from services.algorithm.task_types import TaskType
from services.coordinator.rollout_port import EngineRollouts
from services.coordinator.seeding import seed_buffers
from services.coordinator.step import StepConfig
from services.records import TripletSource
from services.store import open_store

CONFIG = StepConfig(batch_size=2, references_k=6, learnability_samples=8, induction_inputs=10,
                    max_response_tokens=64, temperature=1.0, top_p=1.0)


@pytest.fixture(scope="module")
def executor() -> Iterator[Executor]:
    with Executor(workers=1) as running:
        yield running


def test_seeding_fills_every_buffer_with_seed_entries(tmp_path: Path, executor: Executor) -> None:
    store = open_store(f"sqlite:///{tmp_path / 'b.sqlite3'}", create=True)
    report = seed_buffers(store=store, executor=executor, rollouts=EngineRollouts(ScriptedEngine(SCRIPTS)),
                          config=CONFIG, target=4, max_rounds=10, rng=random.Random(1))
    assert report["reached"] is True
    for task_type in TaskType:
        assert store.count(task_type) >= 4
    entries, _ = store.list_entries(TaskType.DEDUCTION, limit=100)
    sources = {e.source for e in entries}
    assert sources == {TripletSource.ZERO, TripletSource.SEED}
    # D_abd = D_ded: every seeded program of one is in the other too
    abduction, _ = store.list_entries(TaskType.ABDUCTION, limit=100)
    assert {(e.program, e.input) for e in entries} == {(e.program, e.input) for e in abduction}
    assert all(e.step == 0 for e in entries)
    store.close()


def test_seeding_gives_up_after_max_rounds_and_says_so(tmp_path: Path, executor: Executor) -> None:
    never_valid = dict(SCRIPTS, **{kind: (lambda _i, _s: "no template") for kind in SCRIPTS if kind.startswith("propose")})
    store = open_store(f"sqlite:///{tmp_path / 'b.sqlite3'}", create=True)
    engine = ScriptedEngine(never_valid)
    report = seed_buffers(store=store, executor=executor, rollouts=EngineRollouts(engine), config=CONFIG,
                          target=4, max_rounds=2, rng=random.Random(1))
    assert report["reached"] is False
    assert report["triplet_rounds"] == 2 and report["induction_rounds"] == 2
    assert store.count(TaskType.DEDUCTION) == 1  # the zero triplet only
    assert store.count(TaskType.INDUCTION) == 0
    store.close()
