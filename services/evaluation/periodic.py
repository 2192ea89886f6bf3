"""The coordinator's periodic CRUXEval evaluation: after every `eval_every_steps`-th step, CRUXEval-O and -I on the
first `eval_limit` rows of `eval_data`, greedy, through the coordinator's own rollout port and executor.

So it measures the policy where the coordinator reaches it: the local engine in the embedded profile (after the
step's update was pushed to it), the solver API in the distributed one (whatever version the trainer has pushed to
the inference servers by then; `eval/policy_version` says which). Its keys join that step's metrics line.
"""

from __future__ import annotations

from pathlib import Path

from services.evaluation.cruxeval import CruxRow, Split, metrics_keys
from services.evaluation.dataset import load_rows
from services.evaluation.runner import Progress, run_cruxeval
from services.json_types import JsonObject
from services.ports import CodeExecutor, Rollouts
from services.settings import ObservabilitySettings, RolloutSettings

EVAL_CHUNK_TASKS = 64
"""Tasks per solve call: one HTTP request's worth in the distributed profile (the local engine batches further)."""


def policy_version_of(weight_versions: set[str]) -> int | None:
    """The integer policy version that answered, when all answers came from one integer version, else None."""
    if len(weight_versions) != 1:
        return None
    try:
        return int(next(iter(weight_versions)))
    except ValueError:  # SGLang's "default" before any weight push
        return None


class PeriodicEvaluation:
    """Decides when to evaluate and returns the metrics-line entries; the rows are read once, at construction."""

    def __init__(self, *, every_steps: int, rows: list[CruxRow], rollouts: Rollouts, executor: CodeExecutor,
                 max_new_tokens: int, check_parallelism: int = 8, progress: Progress | None = None) -> None:
        if every_steps < 1:
            raise ValueError("every_steps must be at least 1 (0 means no PeriodicEvaluation at all)")
        self.every_steps, self.rows, self.rollouts, self.executor = every_steps, rows, rollouts, executor
        self.max_new_tokens, self.check_parallelism = max_new_tokens, check_parallelism
        self.say = progress or (lambda _message: None)

    @classmethod
    def from_settings(cls, settings: ObservabilitySettings, rollout: RolloutSettings, rollouts: Rollouts,
                      executor: CodeExecutor, progress: Progress | None = None) -> PeriodicEvaluation | None:
        """None when `eval_every_steps` is 0; otherwise reads `eval_data` now, so a missing or malformed file
        stops the coordinator at start (EvalDataError naming the line), not k steps later. Answers are as long as
        the rollouts' (`max_response_tokens`) and checked as many at once as the step's."""
        if settings.eval_every_steps == 0:
            return None
        rows = load_rows(Path(settings.eval_data), settings.eval_limit)
        return cls(every_steps=settings.eval_every_steps, rows=rows, rollouts=rollouts, executor=executor,
                   max_new_tokens=rollout.max_response_tokens,
                   check_parallelism=rollout.coordinator_executor_parallelism, progress=progress)

    def due(self, step: int) -> bool:
        """Whether step `step` ends with an evaluation (every k-th step: k, 2k, ...)."""
        return step % self.every_steps == 0

    def evaluate(self, step: int) -> JsonObject:
        """Run both splits now; `eval/cruxeval_o`, `eval/cruxeval_i` (accuracy), their `/count` (rows evaluated),
        `eval/policy_version` (the weights that answered, when one integer version did) and `time/eval`."""
        report = run_cruxeval(self.rollouts, self.executor, self.rows, list(Split), max_new_tokens=self.max_new_tokens,
                              batch_size=EVAL_CHUNK_TASKS, check_parallelism=self.check_parallelism)
        entries: JsonObject = dict(metrics_keys(report.scores))
        entries["eval/policy_version"] = policy_version_of({s.weight_version for s in report.samples})
        entries["time/eval"] = round(report.seconds, 4)
        self.say(f"step {step} evaluation ({report.seconds:.1f} s): "
                 + " | ".join(report.scores[split].line() for split in Split))
        return entries
