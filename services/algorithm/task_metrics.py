"""Complexity and diversity metrics of proposed tasks (paper App. C.4, Fig 27), as small pure functions.

The coordinator calls `task_metrics` for every valid proposal and logs `aggregate_task_metrics` of a step. Nothing
here does I/O or runs the program; `AnswerHistory` is the only state (the coordinator owns one).

Metrics and decisions (paper = Zhao et al. 2025; reference = the authors' code, LeapLabTHU/Absolute-Zero-Reasoner,
rewards/code_reward.py):
- Cognitive complexity: `complexipy.code_complexity(program).complexity`, the whole file's score (module-level code
  counts too), raw. The reference logs it divided by 15; `complexity_score` gives that scale for plots like Fig 27.
- Halstead: radon's `h_visit_ast` totals (volume, difficulty, effort, length, vocabulary), raw; radon counts only
  binary/unary/boolean/augmented-assignment operators and comparisons. `halstead_score` is the reference's composite
  (0.5·min(effort/10000, 1) + 0.3·min(max cyclomatic/10, 1) + 0.2·min(volume/500, 1)), the "Halstead measure" scale.
  The reference first reformats code with black; we measure the program as given (these metrics read the AST).
- AST edit distance: mean Zhang–Shasha distance to the K references, raw and normalised to [0, 1]
  (services/algorithm/ast_edit_distance.py says how and why). References that do not parse are skipped and named.
- Answer diversity: 1 − p(answer), p the empirical frequency of the answer among past answers of the same task type
  (1.0 for a first-seen answer, as in the reference). Answers are compared after `canonical_answer`. Which string is
  "the answer" is the caller's choice; we suggest the proposed input for abduction, the output for deduction and the
  joined outputs for induction (the reference counts inputs for abduction and outputs for deduction).
- Robustness: `task_metrics` never raises on any `str`: a metric that cannot be computed is None, and `errors` maps its
  name to the reason (syntax error, library failure, tree too large, no references).
"""

from __future__ import annotations

import ast
import math
from collections import Counter, deque
from collections.abc import Iterable, Mapping, Sequence

from complexipy import code_complexity
from pydantic import BaseModel, Field
from radon.complexity import cc_visit_ast
from radon.metrics import h_visit_ast

from services.algorithm import thread_safe_ast
from services.algorithm.ast_edit_distance import (
    DEFAULT_MAX_NODES,
    TreeTooLarge,
    index_ast,
    index_program,
    tree_edit_distance,
)
from services.algorithm.task_types import TaskType

TASK_METRICS_SCHEMA_VERSION = 1
"""Bumped whenever the fields of `TaskMetrics` change."""

COMPLEXITY_SCALE = 15.0
"""Reference divisor of the complexipy score (reference `get_code_complexity_reward`)."""

HALSTEAD_EFFORT_MAX, HALSTEAD_CYCLOMATIC_MAX, HALSTEAD_VOLUME_MAX = 10000.0, 10.0, 500.0
"""Reference normalisers of the Halstead composite score."""

DEFAULT_ANSWER_WINDOW = 16384
"""Answers remembered per task type (the reference's buffer cap): older ones are forgotten first."""

METRIC_NAMES: tuple[str, ...] = (
    "cognitive_complexity",
    "complexity_score",
    "halstead_volume",
    "halstead_difficulty",
    "halstead_effort",
    "halstead_length",
    "halstead_vocabulary",
    "halstead_score",
    "ast_edit_distance",
    "ast_edit_distance_normalized",
    "answer_diversity",
)
"""The numeric fields of `TaskMetrics`, in logging order."""


class TaskMetrics(BaseModel):
    """App. C.4 metrics of one proposed task. A None field could not be computed: `errors[field]` says why."""

    schema_version: int = TASK_METRICS_SCHEMA_VERSION
    task_type: TaskType | None = None
    cognitive_complexity: int | None = None
    complexity_score: float | None = None
    halstead_volume: float | None = None
    halstead_difficulty: float | None = None
    halstead_effort: float | None = None
    halstead_length: int | None = None
    halstead_vocabulary: int | None = None
    halstead_score: float | None = None
    ast_edit_distance: float | None = None
    ast_edit_distance_normalized: float | None = None
    n_references: int = 0  # references actually compared
    answer_diversity: float | None = None
    errors: dict[str, str] = Field(default_factory=dict)


def cognitive_complexity(program: str) -> int:
    """complexipy's cognitive complexity of the whole program. Raises ValueError if complexipy cannot parse it."""
    return int(code_complexity(program).complexity)


def halstead_metrics(tree: ast.AST) -> dict[str, float | int]:
    """radon's Halstead totals of a parsed program, plus the reference's composite `halstead_score`."""
    report = h_visit_ast(tree).total
    cyclomatic = max((block.complexity for block in cc_visit_ast(tree)), default=1)
    score = (
        0.5 * min(report.effort / HALSTEAD_EFFORT_MAX, 1.0)
        + 0.3 * min(cyclomatic / HALSTEAD_CYCLOMATIC_MAX, 1.0)
        + 0.2 * min(report.volume / HALSTEAD_VOLUME_MAX, 1.0)
    )
    return {
        "halstead_volume": float(report.volume),
        "halstead_difficulty": float(report.difficulty),
        "halstead_effort": float(report.effort),
        "halstead_length": int(report.length),
        "halstead_vocabulary": int(report.vocabulary),
        "halstead_score": score,
    }


def ast_edit_distance(program: str, other: str, *, normalized: bool = False,
                      max_nodes: int = DEFAULT_MAX_NODES) -> float:
    """Tree edit distance between two programs' ASTs (raises SyntaxError/ValueError if one does not parse)."""
    a, b = index_program(program), index_program(other)
    distance = tree_edit_distance(a, b, max_nodes=max_nodes)
    return distance / (a.size + b.size) if normalized else float(distance)


def mean_ast_edit_distance(
    program: str, references: Sequence[str], *, max_nodes: int = DEFAULT_MAX_NODES
) -> tuple[float, float, int]:
    """Mean raw and normalised distance of `program` to the references that parse, and how many did.

    Raises ValueError when no reference could be compared (none given, or none parses), SyntaxError when `program`
    does not parse, `TreeTooLarge` when `program` is past `max_nodes`. Oversized references are skipped.
    """
    tree = index_ast(thread_safe_ast.parse(program))
    if tree.size > max_nodes:
        raise TreeTooLarge(f"the program has {tree.size} AST nodes: the limit is {max_nodes}")
    raw: list[float] = []
    normalized: list[float] = []
    skipped: list[str] = []
    for reference in references:
        try:
            other = index_program(reference)
            distance = tree_edit_distance(tree, other, max_nodes=max_nodes)
        except (SyntaxError, ValueError, RecursionError, MemoryError) as error:
            skipped.append(type(error).__name__)  # a broken or oversized reference must not hide the others
            continue
        raw.append(float(distance))
        normalized.append(distance / (tree.size + other.size))
    if not raw:
        raise ValueError(f"none of the {len(references)} references could be compared ({', '.join(skipped)})")
    return sum(raw) / len(raw), sum(normalized) / len(normalized), len(raw)


def canonical_answer(answer: str) -> str:
    """The answer as Python would print it back (`ast.unparse`), so `1,2` and `(1, 2)` count as one; else stripped."""
    text = answer.strip()
    try:
        return ast.unparse(thread_safe_ast.parse(text, mode="eval"))
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return text


def answer_diversity(answer: str, past_counts: Mapping[str, int]) -> float:
    """1 − empirical probability of `answer` among past answers (counts keyed as given); 1.0 with no past answers."""
    total = sum(past_counts.values())
    if total == 0:
        return 1.0
    return 1.0 - past_counts.get(answer, 0) / total


class AnswerHistory:
    """Counts of past answers per task type over a sliding window of the last `window` answers of each type.

    Memory is bounded by `window` strings per task type. Not thread-safe: one owner (the coordinator) writes it.
    """

    def __init__(self, window: int = DEFAULT_ANSWER_WINDOW) -> None:
        """Keep at most `window` (≥ 1) answers per task type."""
        if window < 1:
            raise ValueError(f"window must be at least 1, got {window}")
        self.window = window
        self._recent: dict[TaskType, deque[str]] = {}
        self._counts: dict[TaskType, Counter[str]] = {}

    def observe(self, task_type: TaskType, answer: str) -> None:
        """Record one answer; forget the oldest of that task type past the window."""
        key = canonical_answer(answer)
        recent = self._recent.setdefault(task_type, deque())
        counts = self._counts.setdefault(task_type, Counter())
        recent.append(key)
        counts[key] += 1
        if len(recent) > self.window:
            oldest = recent.popleft()
            counts[oldest] -= 1
            if counts[oldest] == 0:
                del counts[oldest]

    def observe_all(self, task_type: TaskType, answers: Iterable[str]) -> None:
        """Record several answers in order."""
        for answer in answers:
            self.observe(task_type, answer)

    def counts(self, task_type: TaskType) -> Mapping[str, int]:
        """Remembered answers of a task type (canonical form) with their counts; a read-only view."""
        return dict(self._counts.get(task_type, {}))

    def size(self, task_type: TaskType) -> int:
        """How many answers of this task type are remembered."""
        return len(self._recent.get(task_type, ()))

    def diversity(self, task_type: TaskType, answer: str) -> float:
        """`answer_diversity` of `answer` against this task type's remembered answers (does not record it)."""
        return answer_diversity(canonical_answer(answer), self._counts.get(task_type, {}))


def _reason(error: BaseException) -> str:
    """One line naming the failure."""
    return f"{type(error).__name__}: {error}".splitlines()[0][:300]


def task_metrics(
    program: str,
    references: Sequence[str],
    answer: str | None,
    history: AnswerHistory | None,
    *,
    task_type: TaskType | None = None,
    max_nodes: int = DEFAULT_MAX_NODES,
) -> TaskMetrics:
    """All App. C.4 metrics of one proposal. Never raises: failed metrics are None with a reason in `errors`.

    `history` is only read: record the answer afterwards with `history.observe(task_type, answer)`, so every proposal
    of a step is scored against earlier answers only. Answer diversity needs `answer`, `history` and `task_type`.
    """
    fields: dict[str, object] = {"task_type": task_type}
    errors: dict[str, str] = {}
    complexity_fields = ("cognitive_complexity", "complexity_score")
    halstead_fields = tuple(name for name in METRIC_NAMES if name.startswith("halstead_"))
    distance_fields = ("ast_edit_distance", "ast_edit_distance_normalized")
    try:
        score = cognitive_complexity(program)
        fields.update(cognitive_complexity=score, complexity_score=score / COMPLEXITY_SCALE)
    except BaseException as error:  # noqa: BLE001 — a Rust panic in complexipy surfaces as a BaseException
        if isinstance(error, (KeyboardInterrupt, SystemExit)):
            raise
        errors.update(dict.fromkeys(complexity_fields, _reason(error)))
    try:
        tree: ast.AST | None = thread_safe_ast.parse(program)
    except (SyntaxError, ValueError, RecursionError, MemoryError) as error:
        tree = None
        errors.update(dict.fromkeys(halstead_fields + distance_fields, _reason(error)))
    if tree is not None:
        try:
            fields.update(halstead_metrics(tree))
        except Exception as error:  # noqa: BLE001 — radon's visitors may choke on syntax they do not know
            errors.update(dict.fromkeys(halstead_fields, _reason(error)))
        try:
            raw, normalized, compared = mean_ast_edit_distance(program, references, max_nodes=max_nodes)
            fields.update(ast_edit_distance=raw, ast_edit_distance_normalized=normalized, n_references=compared)
        except Exception as error:  # noqa: BLE001 — too large, no usable reference, deep recursion
            errors.update(dict.fromkeys(distance_fields, _reason(error)))
    if answer is None or history is None or task_type is None:
        errors["answer_diversity"] = "needs an answer, an answer history and a task type"
    else:
        fields["answer_diversity"] = history.diversity(task_type, answer)
    return TaskMetrics(**fields, errors=errors)


def aggregate_task_metrics(metrics: Sequence[TaskMetrics]) -> dict[str, float]:
    """Means of each metric over the tasks that have it, overall (`name`) and per task type (`type/name`).

    Also `n_tasks` (and `type/n_tasks`). A metric no task has is left out rather than logged as 0.
    """
    groups: dict[str, list[TaskMetrics]] = {"": list(metrics)}
    for item in metrics:
        if item.task_type is not None:
            groups.setdefault(f"{item.task_type.value}/", []).append(item)
    result: dict[str, float] = {}
    for prefix, items in groups.items():
        result[f"{prefix}n_tasks"] = float(len(items))
        for name in METRIC_NAMES:
            values = [float(value) for item in items if (value := getattr(item, name)) is not None]
            values = [value for value in values if math.isfinite(value)]
            if values:
                result[f"{prefix}{name}"] = sum(values) / len(values)
    return result
