"""Buffer initialisation (§3.3.1): the zero triplet, then B×S triplets and B×S induction tasks from the base model.

Seeding proposes with the current (base) weights and makes no update; valid proposals are stored with source
`seed` at step 0, their programs stripped of comments and global variables first (§3.3.1, App. C). D_abd and D_ded
are seeded together ("D_abd = D_ded"): every valid deduction or abduction proposal goes into both. Seeding goes on
until the target is reached, as the paper says, reporting every round; a weak model may never get there, so it gives
up after `max_rounds` rounds per phase (`AZR_SEED_MAX_ROUNDS`) and says so, naming that setting (the run goes on
with what it has; `azr seeds import` or `--seed-file` fill buffers from a file).
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from services.algorithm.task_types import TaskType
from services.coordinator.proposal_round import ProposalRound
from services.coordinator.step_config import StepConfig
from services.coordinator.step_metrics import PhaseTimer
from services.json_types import JsonObject
from services.ports import CodeExecutor, Rollouts, TripletStore
from services.records import Triplet, TripletSource

ProgressCallback = Callable[[str], None]
BOUND_SETTING = "AZR_SEED_MAX_ROUNDS"


def _round_line(phase: str, rounds: int, max_rounds: int, counts: str, valid: int, proposed: int,
                began: float) -> str:
    return (f"seeding {phase} round {rounds} (at most {max_rounds}): {counts}; this round {valid}/{proposed} "
            f"proposals valid; {time.perf_counter() - began:.0f}s so far")


def seed_buffers(*, store: TripletStore, executor: CodeExecutor, rollouts: Rollouts, config: StepConfig,
                 target: int, max_rounds: int, rng: random.Random, policy_version: int = 0,
                 progress: ProgressCallback | None = None) -> JsonObject:
    """Fill D_abd = D_ded, then D_ind, up to `target` entries each; returns a report (rounds, counts, reached)."""
    store.initialise()
    timer = PhaseTimer()
    report: JsonObject = {"target": target}
    say = progress or (lambda _message: None)
    began = time.perf_counter()
    with ThreadPoolExecutor(max_workers=8, thread_name_prefix="azr-seeding") as pool:
        round_ = ProposalRound(store=store, executor=executor, rollouts=rollouts, config=config, pool=pool,
                               timer=timer)
        rounds = 0
        while min(store.count(TaskType.DEDUCTION), store.count(TaskType.ABDUCTION)) < target and rounds < max_rounds:
            rounds += 1
            valid = proposed = 0
            pending = round_.generate((TaskType.DEDUCTION, TaskType.ABDUCTION), config.batch_size, rng, step=0,
                                      policy_version=policy_version, source=TripletSource.SEED, strip=True)
            for task_type, batch in pending.items():
                stored = round_.store_valid(batch)
                valid, proposed = valid + len(stored.entries), proposed + len(batch.validations)
                for entry in stored.entries.values():  # D_abd = D_ded: a valid triplet seeds both buffers
                    assert isinstance(entry, Triplet)
                    other = TaskType.ABDUCTION if task_type is TaskType.DEDUCTION else TaskType.DEDUCTION
                    store.insert_triplet(entry.model_copy(update={"id": None, "buffer": other}))
            counts = (f"D_ded {store.count(TaskType.DEDUCTION)}, D_abd {store.count(TaskType.ABDUCTION)} "
                      f"of {target}")
            say(_round_line("D_ded/D_abd", rounds, max_rounds, counts, valid, proposed, began))
        report["triplet_rounds"] = rounds
        rounds = 0
        while store.count(TaskType.INDUCTION) < target and rounds < max_rounds:
            rounds += 1
            generated = round_.generate((TaskType.INDUCTION,), config.batch_size, rng, step=0,
                                        policy_version=policy_version, source=TripletSource.SEED)
            batch = generated[TaskType.INDUCTION]
            stored = round_.store_valid(batch)
            say(_round_line("D_ind", rounds, max_rounds, f"D_ind {store.count(TaskType.INDUCTION)} of {target}",
                            len(stored.entries), len(batch.validations), began))
        report["induction_rounds"] = rounds
    for task_type in TaskType:
        report[f"buffer/{task_type.value}"] = store.count(task_type)
    report["reached"] = all(store.count(t) >= target for t in TaskType)
    if not report["reached"]:
        short = ", ".join(f"{t.value} {store.count(t)}" for t in TaskType if store.count(t) < target)
        report["gave_up"] = (f"seeding gave up after {max_rounds} rounds per phase ({BOUND_SETTING}={max_rounds}) "
                             f"short of {target} entries per buffer: {short}; raise {BOUND_SETTING} or import seeds "
                             f"(--seed-file, `azr seeds import`)")
        say(report["gave_up"])
    report.update(timer.breakdown())
    return report
