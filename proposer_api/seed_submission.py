"""`POST /v1/seeds` without HTTP: validate a seed through the executor, then store it in the buffers it names.

Order matters for "never stored-but-unreported": nothing is written before the executor has answered, and a write
is idempotent (dedup on normalised program + input), so a client that lost the response and retries gets the
existing ids back with `created: false`.
"""

from __future__ import annotations

from proposer_api.schemas import InductionSeed, ProgramSeed, SeedAccepted, SeedRejected, StoredOutcome
from services.algorithm.task_types import TaskType
from services.execution import ExecStatus
from services.ports import CodeExecutor, InsertOutcome, TripletStore
from services.records import InductionTask, Triplet, TripletSource


class SeedRejectedError(Exception):
    """The executor judged the program unusable (the program's fault): 422."""

    def __init__(self, rejection: SeedRejected) -> None:
        super().__init__(rejection.detail)
        self.rejection = rejection


class ExecutorUnavailableError(Exception):
    """The executor could not judge (infrastructure fault, not the program's): 503."""


class QuotaReachedError(Exception):
    """A buffer already holds `seed_submission_quota` submitted (`user`) entries: 409, nothing stored."""


def check_quota(store: TripletStore, buffers: list[TaskType], quota: int) -> None:
    """Refuse before any work when a target buffer holds `quota` submitted entries already (checked, not reserved:
    concurrent submissions may pass it by their number)."""
    for buffer in buffers:
        _, held = store.list_entries(buffer, limit=1, source=TripletSource.USER)
        if held >= quota:
            raise QuotaReachedError(f"{buffer.value} holds {held} submitted entries, the quota "
                                    f"(seed_submission_quota) is {quota}: nothing stored")


def submit_program_seed(seed: ProgramSeed, executor: CodeExecutor, store: TripletStore,
                        quota: int | None = None) -> SeedAccepted:
    """Validate `f(input)` and store the triplet in each requested buffer (`quota`: see check_quota)."""
    if quota is not None:
        check_quota(store, [TaskType(name) for name in seed.buffers], quota)
    result = executor.validate_proposal(seed.program, seed.input)
    if result.status == ExecStatus.SANDBOX_ERROR:
        raise ExecutorUnavailableError(f"sandbox error: {result.error}")
    if result.status != ExecStatus.OK or result.output is None:
        raise SeedRejectedError(SeedRejected(detail="the executor rejected the program", status=result.status,
                                             error=result.error))
    outcomes, entries = [], []
    for buffer in dict.fromkeys(TaskType(name) for name in seed.buffers):  # a buffer named twice is stored once
        triplet = Triplet(buffer=buffer, program=seed.program, input=seed.input, output=result.output,
                          imports=result.imports, source=TripletSource(seed.source))
        outcome = store.insert_triplet(triplet)
        outcomes.append(_outcome(buffer, outcome))
        entries.extend(_stored(store, buffer, outcome))
    return SeedAccepted(outcomes=outcomes, entries=entries)


def submit_induction_seed(seed: InductionSeed, executor: CodeExecutor, store: TripletStore,
                          quota: int | None = None) -> SeedAccepted:
    """Validate the program on every input and store the induction task (`quota`: see check_quota)."""
    if quota is not None:
        check_quota(store, [TaskType.INDUCTION], quota)
    result = executor.validate_induction(seed.program, seed.inputs)
    if result.status == ExecStatus.SANDBOX_ERROR:
        raise ExecutorUnavailableError(f"sandbox error: {result.error}")
    if result.status != ExecStatus.OK or result.outputs is None:
        raise SeedRejectedError(SeedRejected(detail="the executor rejected the program", status=result.status,
                                             error=result.error, failed_index=result.failed_index))
    task = InductionTask(program=seed.program, inputs=seed.inputs, outputs=result.outputs, message=seed.message,
                         source=TripletSource(seed.source))
    outcome = store.insert_induction(task)
    return SeedAccepted(outcomes=[_outcome(TaskType.INDUCTION, outcome)],
                        entries=_stored(store, TaskType.INDUCTION, outcome))


def _outcome(buffer: TaskType, outcome: InsertOutcome) -> StoredOutcome:
    return StoredOutcome(buffer=buffer, id=outcome.id, created=outcome.created)


def _stored(store: TripletStore, buffer: TaskType, outcome: InsertOutcome) -> list[Triplet | InductionTask]:
    """The stored entry as the store returns it; empty if it was evicted between insert and read (possible only
    with a tiny cap under heavy writes: the outcome, not the entry, is the authoritative answer)."""
    entry = store.get(buffer, outcome.id)
    return [entry] if entry is not None else []
