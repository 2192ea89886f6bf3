"""Hand-written metrics lines with the keys the coordinator writes (services/coordinator/step.py), for plot tests."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

TASK_TYPES = ("deduction", "abduction", "induction")


def metrics_line(step: int, *, reward_shift: float = 0.0, with_eval: bool = False,
                 with_task_metrics: bool = True) -> dict[str, Any]:
    """One step's line; rewards climb with the step (plus `reward_shift`), buffers grow, task metrics rise."""
    line: dict[str, Any] = {"step": step, "policy_version": step - 1, "policy_version_after": step}
    for index, task_type in enumerate(TASK_TYPES):
        line[f"valid_rate/{task_type}"] = min(1.0, 0.1 * step + 0.05 * index)
        line[f"buffer/{task_type}"] = 10 + 3 * step + index
        line[f"solve_rate/{task_type}"] = min(1.0, 0.08 * step)
        line[f"learnability/{task_type}"] = 0.5
        line[f"reward/{task_type}/propose"] = max(-1.0, min(1.0, -0.9 + 0.15 * step + reward_shift))
        line[f"reward/{task_type}/solve"] = max(-1.0, min(1.0, -0.6 + 0.1 * step - reward_shift))
        line[f"format_ok/{task_type}/propose"] = min(1.0, 0.5 + 0.1 * step)
        line[f"format_ok/{task_type}/solve"] = min(1.0, 0.2 + 0.15 * step)
        line[f"response_tokens/{task_type}/propose"] = 100.0 + 20 * step + 5 * index
        line[f"response_tokens/{task_type}/solve"] = 60.0 + 10 * step
        if with_task_metrics:
            line[f"task/{task_type}/complexity_score"] = 0.1 + 0.02 * step + 0.01 * index
            line[f"task/{task_type}/answer_diversity"] = 0.5 + 0.03 * step
    if with_task_metrics:
        line.update({"task/n_tasks": 6.0, "task/complexity_score": 0.12 + 0.02 * step,
                     "task/halstead_score": 0.05 + 0.01 * step, "task/ast_edit_distance_normalized": 0.4 + 0.02 * step,
                     "task/answer_diversity": 0.55 + 0.03 * step})
    if with_eval:
        line.update({"eval/cruxeval_o": 0.2 + 0.03 * step, "eval/cruxeval_i": 0.15 + 0.02 * step})
    line.update({"time/total": 5.0, "train/loss": 0.1, "train/checkpoint": f"runs/x/checkpoints/v{step:06d}"})
    return line


def write_run(run_dir: Path, lines: list[dict[str, Any]], trailing: str = "") -> Path:
    """A run directory whose metrics.jsonl holds `lines` (then `trailing`, e.g. a truncated line); returns it."""
    run_dir.mkdir(parents=True, exist_ok=True)
    text = "".join(json.dumps(line, sort_keys=True) + "\n" for line in lines) + trailing
    (run_dir / "metrics.jsonl").write_text(text)
    return run_dir
