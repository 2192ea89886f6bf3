"""Proposal validation (§3.3.3): an extracted task becomes a buffer entry only if the executor says `ok`.

The executor runs the program twice in fresh processes under different hash seeds, refuses forbidden modules, and
computes the gold output(s) under a fixed hash seed (executor_svc/executor.py). Validity alone decides whether a
task joins its buffer; the response's format verdict only changes its reward (§3.3.2). Seeding strips its programs
of comments and global variables first (§3.3.1, `seed_programs.strip_seed_program`); self-play programs go in as
written. An infrastructure fault (services/rollouts/executor_faults.py) leaves the proposal `dropped`. A task whose
text holds a NUL character or a lone surrogate (model text may) is invalid (`syntax_error`) before anything runs: no
buffer can store it (PostgreSQL refuses NUL; UTF-8 cannot carry a lone surrogate).
"""

from __future__ import annotations

from dataclasses import dataclass

from services.algorithm.seed_programs import strip_seed_program
from services.algorithm.task_types import TaskType
from services.execution import ExecStatus
from services.ports import BufferEntry, CodeExecutor
from services.records import InductionTask, Proposal, ProposedInductionTask, Triplet, TripletSource
from services.rollouts.executor_faults import with_fault_retry


def storable(text: str) -> bool:
    """Whether a buffer can store `text`: no NUL character, no lone surrogate."""
    if "\x00" in text:
        return False
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


@dataclass(frozen=True, kw_only=True)
class ValidatedProposal:
    """A proposal with the executor's verdict: `entry` is the buffer entry when valid."""

    proposal: Proposal
    status: str | None  # ExecStatus value; None when no task was extracted (nothing was run) or it was dropped
    error: str | None
    entry: BufferEntry | None
    dropped: bool = False  # the executor failed twice for infrastructure reasons: no verdict, no episode

    @property
    def valid(self) -> bool:
        return self.entry is not None


def dropped(proposal: Proposal) -> ValidatedProposal:
    """The proposal the executor could not judge (an infrastructure fault, twice): no verdict, no episode."""
    return ValidatedProposal(proposal=proposal, status=None, error="executor unavailable", entry=None, dropped=True)


def validate_proposal(executor: CodeExecutor, proposal: Proposal, *, step: int, policy_version: int,
                      source: TripletSource = TripletSource.PROPOSED, strip: bool = False) -> ValidatedProposal:
    """Run the proposal's program in the sandbox; a valid one becomes a Triplet / InductionTask (not yet stored).

    `strip`: seeding's rule, the program is stripped of comments and global variables before it is validated."""
    task = proposal.task
    if task is None:
        return ValidatedProposal(proposal=proposal, status=None, error=proposal.parse_failure, entry=None)
    texts = ([task.program, task.message, *task.inputs] if isinstance(task, ProposedInductionTask)
             else [task.program, task.input])
    if any(not storable(text) for text in texts):
        return ValidatedProposal(proposal=proposal, status=ExecStatus.SYNTAX_ERROR.value,
                                 error="the task holds a NUL character or a lone surrogate: no buffer stores it",
                                 entry=None)
    what = f"validation of a {proposal.task_type.value} proposal"
    if (proposal.task_type is TaskType.INDUCTION) != isinstance(task, ProposedInductionTask):
        raise ValueError(f"a {proposal.task_type.value} proposal carries a {task.kind} task")
    if isinstance(task, ProposedInductionTask):
        inputs = list(task.inputs)
        induction = with_fault_retry(lambda: executor.validate_induction(task.program, inputs),
                                     lambda result: result.status, what)
        if induction is None:
            return dropped(proposal)
        if induction.status is not ExecStatus.OK or induction.outputs is None:
            return ValidatedProposal(proposal=proposal, status=induction.status.value, error=induction.error,
                                     entry=None)
        entry: BufferEntry = InductionTask(program=task.program, inputs=inputs, outputs=induction.outputs,
                                           message=task.message, source=source, step=step,
                                           policy_version=policy_version)
        return ValidatedProposal(proposal=proposal, status=ExecStatus.OK.value, error=None, entry=entry)
    program, given = strip_seed_program(task.program) if strip else task.program, task.input
    single = with_fault_retry(lambda: executor.validate_proposal(program, given), lambda result: result.status, what)
    if single is None:
        return dropped(proposal)
    if single.status is not ExecStatus.OK or single.output is None:
        return ValidatedProposal(proposal=proposal, status=single.status.value, error=single.error, entry=None)
    entry = Triplet(buffer=proposal.task_type, program=program, input=given, output=single.output,
                    imports=list(single.imports), source=source, step=step, policy_version=policy_version)
    return ValidatedProposal(proposal=proposal, status=ExecStatus.OK.value, error=None, entry=entry)
