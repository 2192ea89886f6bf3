"""Buffer initialisation (§3.3.1): the zero triplet, then B×S triplets and B×S induction tasks from the base model.

Seeding proposes with the current (base) weights and makes no update; valid proposals are stored with source
`seed` at step 0. D_abd and D_ded are seeded together ("D_abd = D_ded"): every valid deduction or abduction
proposal goes into both. A weak model may never reach the target: seeding gives up after `max_rounds` rounds per
phase and says so in its report (the run goes on with what it has; `azr seeds import` fills buffers from a file).
"""

from __future__ import annotations

import random
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable

from services.algorithm.task_types import TaskType
from services.coordinator.rollout_port import Rollouts
from services.coordinator.step import ProposalRound, StepConfig
from services.coordinator.step_metrics import PhaseTimer
from services.ports import CodeExecutor, TripletStore
from services.records import Triplet, TripletSource

ProgressCallback = Callable[[str], None]


def seed_buffers(*, store: TripletStore, executor: CodeExecutor, rollouts: Rollouts, config: StepConfig,
                 target: int, max_rounds: int, rng: random.Random, policy_version: int = 0,
                 progress: ProgressCallback | None = None) -> dict[str, Any]:
    """Fill D_abd = D_ded, then D_ind, up to `target` entries each; returns a report (rounds, counts, reached)."""
    store.initialise()
    timer = PhaseTimer()
    report: dict[str, Any] = {"target": target}
    say = progress or (lambda _message: None)
    with ThreadPoolExecutor(max_workers=8, thread_name_prefix="azr-seeding") as pool:
        round_ = ProposalRound(store=store, executor=executor, rollouts=rollouts, config=config, pool=pool,
                               timer=timer)
        rounds = 0
        while min(store.count(TaskType.DEDUCTION), store.count(TaskType.ABDUCTION)) < target and rounds < max_rounds:
            rounds += 1
            for task_type in (TaskType.DEDUCTION, TaskType.ABDUCTION):
                _, futures, _ = round_.generate(task_type, config.batch_size, rng, step=0, policy_version=policy_version,
                                             source=TripletSource.SEED)
                _, entries, _ = round_.store_valid(futures)
                for entry in entries:  # D_abd = D_ded: a valid triplet seeds both buffers
                    assert isinstance(entry, Triplet)
                    other = TaskType.ABDUCTION if task_type is TaskType.DEDUCTION else TaskType.DEDUCTION
                    store.insert_triplet(entry.model_copy(update={"id": None, "buffer": other}))
            say(f"seeding D_ded/D_abd round {rounds}: {store.count(TaskType.DEDUCTION)} / "
                f"{store.count(TaskType.ABDUCTION)} of {target}")
        report["triplet_rounds"] = rounds
        rounds = 0
        while store.count(TaskType.INDUCTION) < target and rounds < max_rounds:
            rounds += 1
            _, futures, _ = round_.generate(TaskType.INDUCTION, config.batch_size, rng, step=0,
                                         policy_version=policy_version, source=TripletSource.SEED)
            round_.store_valid(futures)
            say(f"seeding D_ind round {rounds}: {store.count(TaskType.INDUCTION)} of {target}")
        report["induction_rounds"] = rounds
    for task_type in TaskType:
        report[f"buffer/{task_type.value}"] = store.count(task_type)
    report["reached"] = all(store.count(t) >= target for t in TaskType)
    report.update(timer.breakdown())
    return report
