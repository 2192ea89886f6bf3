"""Buffer initialisation (§3.3.1) with the real executor and store: D_abd = D_ded to B×S, then D_ind; bounded."""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path

import pytest
from scripted_engine import STEP_SCRIPTS as SCRIPTS
from scripted_engine import ScriptedEngine, fenced, r1

from executor_svc.executor import Executor
from services.algorithm.task_types import TaskType
from services.coordinator.seeding import seed_buffers
from services.coordinator.step import StepConfig
from services.records import TripletSource
from services.rollouts.engine_rollouts import EngineRollouts
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
    never_valid = dict(SCRIPTS, **{kind: (lambda _i, _s: "no template") for kind in SCRIPTS
                                   if kind.startswith("propose")})
    store = open_store(f"sqlite:///{tmp_path / 'b.sqlite3'}", create=True)
    engine = ScriptedEngine(never_valid)
    report = seed_buffers(store=store, executor=executor, rollouts=EngineRollouts(engine), config=CONFIG,
                          target=4, max_rounds=2, rng=random.Random(1))
    assert report["reached"] is False
    assert report["triplet_rounds"] == 2 and report["induction_rounds"] == 2
    assert store.count(TaskType.DEDUCTION) == 1  # the zero triplet only
    assert store.count(TaskType.INDUCTION) == 0
    store.close()


def test_seeding_reports_each_round_and_names_its_bound_when_it_gives_up(tmp_path: Path, executor: Executor) -> None:
    never_valid = dict(SCRIPTS, **{kind: (lambda _i, _s: "no template") for kind in SCRIPTS
                                   if kind.startswith("propose")})
    store = open_store(f"sqlite:///{tmp_path / 'b.sqlite3'}", create=True)
    lines: list[str] = []
    report = seed_buffers(store=store, executor=executor, rollouts=EngineRollouts(ScriptedEngine(never_valid)),
                          config=CONFIG, target=4, max_rounds=3, rng=random.Random(1), progress=lines.append)
    round_lines = [line for line in lines if line.startswith("seeding D_ded/D_abd round")]
    assert len(round_lines) == 3 and "round 3 (at most 3)" in round_lines[-1]
    assert "0/4 proposals valid" in round_lines[0]
    assert "AZR_SEED_MAX_ROUNDS=3" in report["gave_up"] and lines[-1] == report["gave_up"]
    store.close()


def test_seed_programs_are_stripped_of_comments_and_globals(tmp_path: Path, executor: Executor) -> None:
    """§3.3.1: seed programs lose comments, docstrings and global statements before validation; self-play does not."""
    cluttered = '"""Doubles."""\nSCALE = 2  # unused global\ndef f(x):\n    # double it\n    return x * 2\nprint(f(3))'

    def propose(_: str, seen: int) -> str:
        return r1(fenced("python", cluttered) + "\n" + fenced("input", str(seen + 1)))

    store = open_store(f"sqlite:///{tmp_path / 'b.sqlite3'}", create=True)
    scripts = dict(SCRIPTS, **{"propose/deduction": propose, "propose/abduction": propose})
    seed_buffers(store=store, executor=executor, rollouts=EngineRollouts(ScriptedEngine(scripts)), config=CONFIG,
                 target=3, max_rounds=2, rng=random.Random(1))
    entries, _ = store.list_entries(TaskType.DEDUCTION, limit=100, source=TripletSource.SEED)
    assert entries and {e.program for e in entries} == {"def f(x):\n    return x * 2"}
    store.close()
