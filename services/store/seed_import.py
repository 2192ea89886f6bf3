"""Seed programs from a JSONL file into the buffers, each validated by the executor first (`azr seeds import`).

Row formats accepted (one JSON object per line):
- the authors' deduction/abduction seeds: `{"snippet", "input", "output", "imports", ...}`;
- the authors' induction seeds: `{"snippet", "inputs", "outputs", "message", "imports", ...}`;
- the `azr validate` rows: `{"id"?, "code"|"snippet", "input"}` or `{..., "inputs", "message"?}`.
The file's outputs are ignored: the stored gold outputs are the executor's (fixed hash seed), as for every entry.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field

from services.algorithm.task_types import TaskType
from services.execution import ExecStatus
from services.json_types import JsonObject
from services.jsonl_rows import read_jsonl_rows
from services.ports import CodeExecutor, TripletStore
from services.records import RECORD_SCHEMA_VERSION, InductionTask, Triplet, TripletSource

BufferChoice = Literal["auto", "deduction", "abduction", "induction"]

INVALID_ROW = "invalid_row"
"""Rejection status of a line that is not a usable row (same word as `azr validate`)."""

MAX_REPORTED_REJECTIONS = 100
"""Rejected rows listed one by one in the summary; the counts cover all of them."""


class RejectedRow(BaseModel):
    """One row the import did not store, and why."""

    line: int
    status: str  # an ExecStatus value, or `invalid_row`
    error: str | None = None


class SeedImportSummary(BaseModel):
    """What `azr seeds import` did: stored and duplicate entries per buffer, rejected rows per status."""

    schema_version: int = RECORD_SCHEMA_VERSION
    file: str
    rows: int = 0
    stored: dict[str, int] = Field(default_factory=dict)  # buffer -> new entries
    duplicate: dict[str, int] = Field(default_factory=dict)  # buffer -> entries already there
    rejected: dict[str, int] = Field(default_factory=dict)  # status -> rows
    rejected_rows: list[RejectedRow] = Field(default_factory=list)  # the first MAX_REPORTED_REJECTIONS

    def count(self, table: dict[str, int], key: str) -> None:
        """Add one to `table[key]`."""
        table[key] = table.get(key, 0) + 1


class _Verdict(BaseModel):
    """A row after validation: the entries to store, or the rejection."""

    line: int
    entries: list[Triplet | InductionTask] = Field(default_factory=list)
    status: str = ExecStatus.OK.value
    error: str | None = None


read_seed_rows = read_jsonl_rows
"""(line number, row or None, problem or None) for every non-blank line of a seed file."""


def _is_induction(row: JsonObject, buffer: BufferChoice) -> bool:
    return buffer == "induction" or (buffer == "auto" and "inputs" in row and "input" not in row)


def validate_seed_row(executor: CodeExecutor, line: int, row: JsonObject, buffer: BufferChoice) -> _Verdict:
    """Run one row through the executor; the entries it would add (one per target buffer) or its rejection."""
    from services.algorithm.static_check import check_program

    program = row.get("code", row.get("snippet"))
    if not isinstance(program, str):
        return _Verdict(line=line, status=INVALID_ROW, error="row has no `code` or `snippet` string")
    if _is_induction(row, buffer):
        inputs = row.get("inputs")
        message = row.get("message", "")
        if not isinstance(inputs, list) or not inputs or not all(isinstance(item, str) for item in inputs):
            return _Verdict(line=line, status=INVALID_ROW, error="induction row needs `inputs`: a list of strings")
        if not isinstance(message, str):
            return _Verdict(line=line, status=INVALID_ROW, error="`message` must be a string")
        induction = executor.validate_induction(program, inputs)
        if induction.status != ExecStatus.OK or induction.outputs is None:
            return _Verdict(line=line, status=induction.status.value, error=induction.error)
        task = InductionTask(program=program, inputs=inputs, outputs=induction.outputs, message=message,
                             imports=check_program(program).imports, source=TripletSource.SEED)
        return _Verdict(line=line, entries=[task])
    argument = row.get("input")
    if not isinstance(argument, str):
        return _Verdict(line=line, status=INVALID_ROW, error="row has no `input` string")
    result = executor.validate_proposal(program, argument)
    if result.status != ExecStatus.OK or result.output is None:
        return _Verdict(line=line, status=result.status.value, error=result.error)
    targets = [TaskType.DEDUCTION, TaskType.ABDUCTION] if buffer == "auto" else [TaskType(buffer)]
    return _Verdict(line=line, entries=[
        Triplet(buffer=target, program=program, input=argument, output=result.output, imports=result.imports,
                source=TripletSource.SEED) for target in targets])


def import_seeds(path: Path, executor: CodeExecutor, store: TripletStore, *, buffer: BufferChoice = "auto",
                 parallel: int = 4) -> SeedImportSummary:
    """Validate every row of `path` (`parallel` at a time) and store the valid ones, in file order, as seeds."""
    summary = SeedImportSummary(file=str(path))
    with ThreadPoolExecutor(max_workers=max(1, parallel)) as pool:
        futures = []
        for line, row, problem in read_seed_rows(path):
            if row is None:
                futures.append(pool.submit(_Verdict, line=line, status=INVALID_ROW, error=problem))
            else:
                futures.append(pool.submit(validate_seed_row, executor, line, row, buffer))
        for future in futures:  # in file order, so ids follow the file
            verdict = future.result()
            summary.rows += 1
            if verdict.status != ExecStatus.OK.value:
                summary.count(summary.rejected, verdict.status)
                if len(summary.rejected_rows) < MAX_REPORTED_REJECTIONS:
                    summary.rejected_rows.append(RejectedRow(line=verdict.line, status=verdict.status,
                                                             error=verdict.error))
                continue
            for entry in verdict.entries:
                outcome = (store.insert_induction(entry) if isinstance(entry, InductionTask)
                           else store.insert_triplet(entry))
                summary.count(summary.stored if outcome.created else summary.duplicate, entry.buffer.value)
    return summary
