"""Proposal validation (§3.3.3): a parsed proposal becomes a buffer entry only if the executor says `ok`.

The executor runs the program twice in fresh processes under different hash seeds, refuses forbidden modules, and
computes the gold output(s) under a fixed hash seed; see executor_svc/executor.py.
"""

from __future__ import annotations

from dataclasses import dataclass

from services.algorithm.task_types import TaskType
from services.execution import ExecStatus
from services.ports import BufferEntry, CodeExecutor
from services.records import InductionTask, Proposal, Triplet, TripletSource


@dataclass(frozen=True)
class ValidatedProposal:
    """A proposal with the executor's verdict: `entry` is the buffer entry when valid."""

    proposal: Proposal
    status: str | None  # ExecStatus value; None when the response did not parse (nothing was run)
    error: str | None
    entry: BufferEntry | None

    @property
    def valid(self) -> bool:
        return self.entry is not None


def validate_proposal(executor: CodeExecutor, proposal: Proposal, *, step: int, policy_version: int,
                      source: TripletSource = TripletSource.PROPOSED) -> ValidatedProposal:
    """Run the proposal's program in the sandbox; a valid one becomes a Triplet / InductionTask (not yet stored)."""
    task = proposal.task
    if task is None:
        return ValidatedProposal(proposal, None, proposal.parse_failure, None)
    if proposal.task_type is TaskType.INDUCTION:
        assert task.inputs is not None and task.message is not None
        result = executor.validate_induction(task.program, task.inputs)
        if result.status is not ExecStatus.OK or result.outputs is None:
            return ValidatedProposal(proposal, result.status.value, result.error, None)
        entry: BufferEntry = InductionTask(program=task.program, inputs=list(task.inputs), outputs=result.outputs,
                                           message=task.message, source=source, step=step,
                                           policy_version=policy_version)
        return ValidatedProposal(proposal, ExecStatus.OK.value, None, entry)
    assert task.input is not None
    single = executor.validate_proposal(task.program, task.input)
    if single.status is not ExecStatus.OK or single.output is None:
        return ValidatedProposal(proposal, single.status.value, single.error, None)
    entry = Triplet(buffer=proposal.task_type, program=task.program, input=task.input, output=single.output,
                    imports=list(single.imports), source=source, step=step, policy_version=policy_version)
    return ValidatedProposal(proposal, ExecStatus.OK.value, None, entry)
