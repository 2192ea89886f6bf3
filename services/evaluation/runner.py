"""Running CRUXEval on a policy: greedy generation through a `Rollouts` port, answers judged by a `CodeExecutor`.

The generation goes through the coordinator's rollout port (services/ports/rollouts.py) and so through
the same code self-play's solver uses: `services.rollouts.solving.solve` builds the Fig 37/38 prompts and parses
the R1 response, in this process (EngineRollouts) or behind `POST /v1/solve` (HttpRollouts). Every parsed answer
is checked by `check_solution`, the check that gives the solver its reward.

Rows go to the model in chunks of `batch_size` tasks, both splits of a chunk in one generation call (the engine
batches them further); the checks of one chunk run on a thread pool while the next chunk generates, so the sandbox
is never on the critical path.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

from services.evaluation.cruxeval import (
    SPLIT_LABEL,
    SPLIT_TASK_TYPE,
    CruxRow,
    EvalSample,
    Split,
    SplitScore,
    eval_sample,
    score,
    solve_task,
)
from services.ports import CodeExecutor, Rollouts, greedy_sampling
from services.records import Solution
from services.rollouts.solving import check_solution, checked_or_fault

Progress = Callable[[str], None]


@dataclass(frozen=True)
class EvalReport:
    """What one evaluation produced: per-sample records (split-major, file order), the scores, the wall time."""

    samples: list[EvalSample]
    scores: dict[Split, SplitScore]
    seconds: float


def run_cruxeval(rollouts: Rollouts, executor: CodeExecutor, rows: Sequence[CruxRow], splits: Sequence[Split], *,
                 max_new_tokens: int, batch_size: int = 32, check_parallelism: int = 8,
                 progress: Progress | None = None) -> EvalReport:
    """Evaluate `rows` on each split in `splits` with greedy decoding; see the module docstring."""
    if not rows:
        raise ValueError("nothing to evaluate: no rows")
    if batch_size < 1 or check_parallelism < 1:
        raise ValueError("batch_size and check_parallelism must be at least 1")
    say = progress or (lambda _message: None)
    sampling = greedy_sampling(max_new_tokens)
    began = time.perf_counter()
    pending: dict[Split, list[tuple[CruxRow, Solution, Future[Solution | None]]]] = {split: [] for split in splits}
    with ThreadPoolExecutor(max_workers=check_parallelism, thread_name_prefix="azr-eval-check") as pool:
        for start in range(0, len(rows), batch_size):  # both splits of a chunk in one generation call
            chunk = rows[start:start + batch_size]
            tasks = [solve_task(row) for row in chunk]
            groups = rollouts.solve({SPLIT_TASK_TYPE[split]: tasks for split in splits}, sampling)
            for split in splits:
                task_type = SPLIT_TASK_TYPE[split]
                answers = groups.get(task_type, [])
                if len(answers) != len(tasks) or any(len(group) != 1 for group in answers):
                    raise RuntimeError(f"the solve path answered {[len(g) for g in answers]} solutions for "
                                       f"{len(tasks)} tasks at n = 1")
                pending[split] += [(row, group[0], pool.submit(check_solution, executor, task_type, task, group[0]))
                                   for row, task, group in zip(chunk, tasks, answers)]
            say(f"{' + '.join(SPLIT_LABEL[split] for split in splits)}: {start + len(chunk)}/{len(rows)} generated "
                f"({time.perf_counter() - began:.1f} s)")
        samples = [eval_sample(row, split, checked_or_fault(future.result(), solution))
                   for split in splits for row, solution, future in pending[split]]
    return EvalReport(samples=samples, scores=score(samples), seconds=time.perf_counter() - began)
