"""CRUXEval as AZR solver tasks, and the arithmetic of its scores. Pure: no I/O, no model, no executor.

CRUXEval (Gu et al., 2024) rows are (program, input, output) triplets in exactly our form, so (paper App. C.2):
- CRUXEval-O (output prediction) is the *deduction* solver task: shown the program and the input (Fig 38),
  the answer is checked by `check_deduction` (value equality with the gold output, in the sandbox);
- CRUXEval-I (input prediction) is the *abduction* solver task: shown the program and the output (Fig 37),
  the answer is checked by `check_abduction` (f(answer) must equal the gold output, in the sandbox), so any input
  that produces the output counts, not only the gold one.

Accuracy is correct answers over rows evaluated; a response that does not parse, or whose check ends in any status
other than `ok` (including an executor `sandbox_error`), counts as wrong, exactly as the solver reward does.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from services.algorithm.task_types import TaskType
from services.json_types import JsonObject
from services.records import IOSolveTask, Solution


class Split(StrEnum):
    """Which half of CRUXEval: predict the output (CRUXEval-O) or an input (CRUXEval-I)."""

    OUTPUT = "output"
    INPUT = "input"


SPLIT_TASK_TYPE: dict[Split, TaskType] = {Split.OUTPUT: TaskType.DEDUCTION, Split.INPUT: TaskType.ABDUCTION}
"""The solver task each split is: CRUXEval-O = deduction, CRUXEval-I = abduction."""

SPLIT_LABEL: dict[Split, str] = {Split.OUTPUT: "CRUXEval-O", Split.INPUT: "CRUXEval-I"}
"""How the benchmark's authors (and the paper) name each split."""

METRIC_KEY: dict[Split, str] = {Split.OUTPUT: "eval/cruxeval_o", Split.INPUT: "eval/cruxeval_i"}
"""Metrics-line key of each split's accuracy; `<key>/count` holds the rows evaluated (plots and dashboard read
exactly these)."""


class EvalDataError(ValueError):
    """An evaluation file or one of its rows is unusable; the message names the file and the line."""


class CruxRow(BaseModel):
    """One CRUXEval row: `code` defines `f`, `input` is the argument source text, `output` is repr(f(input))."""

    model_config = ConfigDict(extra="ignore")  # other columns of a CRUXEval export are not ours to refuse

    id: str = Field(min_length=1)
    code: str = Field(min_length=1)
    input: str  # may be empty: a call `f()` with no arguments
    output: str = Field(min_length=1)


def row_from_object(line: int, obj: JsonObject, where: str) -> CruxRow:
    """Validate one decoded JSONL object; a row without an `id` is named `line-<N>` (its line in the file).

    EvalDataError names `where` and `line` and each field that is missing or not a string (empty only `input`).
    """
    values = dict(obj)
    values.setdefault("id", f"line-{line}")
    try:
        return CruxRow.model_validate(values)
    except ValidationError as error:
        problems = "; ".join(f"`{'.'.join(str(p) for p in e['loc'])}`: {e['msg']}" for e in error.errors())
        raise EvalDataError(f"{where}: line {line}: not a CRUXEval row (needs string fields code, input, output "
                            f"and optionally id): {problems}") from None


def solve_task(row: CruxRow) -> IOSolveTask:
    """The row as a solver task of either split (the prompt shows the input for O, the output for I)."""
    return IOSolveTask(task_id=row.id, program=row.code, input=row.input, output=row.output)


def gold_answer(row: CruxRow, split: Split) -> str:
    """What the split asks for: the gold output (O) or the gold input (I; any input giving the output is right)."""
    return row.output if split is Split.OUTPUT else row.input


class EvalSample(BaseModel):
    """One evaluated (row, split): a line of the per-sample JSONL."""

    id: str
    split: Split
    task_type: TaskType
    response: str  # the model's whole response text
    answer: str | None  # the answer as read (also when the format check failed); None when none could be read
    format_ok: bool  # the Eq 6 format verdict; an answer with a format error is wrong, never checked
    parse_failure: str | None  # why it is a format error (services.algorithm.response_format.ParseFailure value)
    correct: bool
    exec_status: str | None  # the executor's check status; None when nothing was run (a format error)
    gold: str  # the gold output (O) or gold input (I)
    finish_reason: str
    response_tokens: int
    weight_version: str  # the policy version of the weights that answered, as the engine reports it
    checkpoint_version: int | None = None  # the checkpoint `azr eval` loaded (its vNNNNNN); None for a base model


def eval_sample(row: CruxRow, split: Split, solution: Solution) -> EvalSample:
    """The per-sample record of a checked solution (`services.rollouts.solving.check_solution` output)."""
    if not solution.checked:
        raise ValueError(f"solution for {row.id} ({split}) was never checked")
    return EvalSample(id=row.id, split=split, task_type=SPLIT_TASK_TYPE[split], response=solution.text,
                      answer=solution.answer, format_ok=solution.format_ok, parse_failure=solution.parse_failure,
                      correct=bool(solution.correct),
                      exec_status=solution.exec_status, gold=gold_answer(row, split),
                      finish_reason=solution.finish_reason, response_tokens=len(solution.response_ids),
                      weight_version=solution.weight_version)


@dataclass(frozen=True)
class SplitScore:
    """Accuracy of one split and what it is made of."""

    split: Split
    correct: int
    count: int
    parse_failures: int  # responses failing the Eq 6 format check (their answers are never checked)

    @property
    def accuracy(self) -> float:
        """correct / count (0.0 for an empty split, which the callers never evaluate)."""
        return self.correct / self.count if self.count else 0.0

    @property
    def format_ok_rate(self) -> float:
        """Share of responses passing the format check."""
        return (self.count - self.parse_failures) / self.count if self.count else 0.0

    def line(self) -> str:
        """The printed summary, e.g. `CRUXEval-O  accuracy 0.350 (7/20)  format OK 0.900  parse failures 2`."""
        return (f"{SPLIT_LABEL[self.split]}  accuracy {self.accuracy:.3f} ({self.correct}/{self.count})  "
                f"format OK {self.format_ok_rate:.3f}  parse failures {self.parse_failures}")


def score(samples: Iterable[EvalSample]) -> dict[Split, SplitScore]:
    """One SplitScore per split present in `samples`, in Split order."""
    tally: dict[Split, list[int]] = {}
    for sample in samples:
        correct, count, failures = tally.setdefault(sample.split, [0, 0, 0])
        tally[sample.split] = [correct + sample.correct, count + 1, failures + (not sample.format_ok)]
    return {split: SplitScore(split, *tally[split]) for split in Split if split in tally}


def metrics_keys(scores: dict[Split, SplitScore]) -> dict[str, float | int]:
    """The metrics-line entries: `eval/cruxeval_o` (accuracy), `eval/cruxeval_o/count` and
    `eval/cruxeval_o/format_ok` (share passing the format check), same for `_i`."""
    keys: dict[str, float | int] = {}
    for split, split_score in scores.items():
        keys[METRIC_KEY[split]] = round(split_score.accuracy, 6)
        keys[f"{METRIC_KEY[split]}/count"] = split_score.count
        keys[f"{METRIC_KEY[split]}/format_ok"] = round(split_score.format_ok_rate, 6)
    return keys
