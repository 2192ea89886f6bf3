"""Step-0 rates of a real-model-text corpus under the reading rules, and the token budget they call for.

    python bench/reading_rates.py tests/data/model_text/qwen-coder-0.5b.jsonl [--old-rules DIR] [--budgets ...]

For each (task type, role): rows; format-OK (Eq 6 template); extractable (a task or an answer the reward code can
use); executor-valid (proposers: the executor accepts the extracted task; solvers: the answer is well formed and
right); the share cut at the sampling limit; and the share that would be cut at each candidate budget (responses
longer than it). With `--old-rules DIR` (a checkout of the commit before the reading rules changed, e.g. `git worktree
add /tmp/old b2e1c58`), the same rates under the old, stricter parser, read from that checkout's modules. Prints a
Markdown table (docs/benchmarks.md's) and, per budget, the mean response length a step would generate.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from statistics import fmean
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from executor_svc.executor import Executor  # noqa: E402
from services.algorithm.parsing import (  # noqa: E402
    InductionProposal,
    ProgramProposal,
    read_response,
)
from services.algorithm.task_types import Role, TaskType  # noqa: E402
from services.reporting.response_reading import KINDS, parse_kind  # noqa: E402

Reader = Callable[[TaskType, Role, str], tuple[bool, bool, Any]]
"""(task type, role, text) -> (format_ok, extractable, extracted task or answer)."""


def new_reader(task_type: TaskType, role: Role, text: str) -> tuple[bool, bool, Any]:
    reading = read_response(task_type, role, text)
    extracted = reading.extracted
    value: Any = reading.solver_answer
    if isinstance(extracted, ProgramProposal):
        value = (extracted.program, extracted.input)
    elif isinstance(extracted, InductionProposal):
        value = list(extracted.inputs)
    return reading.format_ok, extracted is not None, value


def old_reader(checkout: Path) -> Reader:
    """The old parser: its strict R1 check (`split_r1_response`) and its task parser, which refused whatever failed
    that check, so under it nothing was extractable from a response with a format error."""
    sys.path.insert(0, str(checkout))
    for name in [m for m in sys.modules if m.startswith("services")]:
        del sys.modules[name]
    parsing = importlib.import_module("services.algorithm.parsing")
    response_format = importlib.import_module("services.algorithm.response_format")
    failed = response_format.ParseFailed
    sys.path.remove(str(checkout))
    for name in [m for m in sys.modules if m.startswith("services")]:
        del sys.modules[name]  # the rest of this script imports the current tree again

    def read(task_type: TaskType, role: Role, text: str) -> tuple[bool, bool, Any]:
        format_ok = not isinstance(response_format.split_r1_response(text), failed)
        parsed = parsing.parse_response(task_type.value, role.value, text)
        if isinstance(parsed, failed):
            return format_ok, False, None
        if hasattr(parsed, "program") and hasattr(parsed, "input") and role is Role.PROPOSE:
            return format_ok, True, (parsed.program.source, parsed.input)
        if hasattr(parsed, "inputs"):
            return format_ok, True, list(parsed.inputs)
        if hasattr(parsed, "output"):
            return format_ok, True, parsed.output
        if hasattr(parsed, "input"):
            return format_ok, True, parsed.input
        return format_ok, True, parsed.program.source

    return read


def executor_valid(executor: Executor, kind: str, row: dict[str, Any], format_ok: bool, value: Any) -> bool:
    """Proposers: the executor accepts the extracted task. Solvers: well formed and right."""
    task_type, role = parse_kind(kind)
    context = row["context"]
    if value is None:
        return False
    if role is Role.PROPOSE:
        if task_type is TaskType.INDUCTION:
            return executor.validate_induction(context["program"], value).status.value == "ok"
        program, given = value
        return executor.validate_proposal(program, given).status.value == "ok"
    if not format_ok:
        return False
    if task_type is TaskType.DEDUCTION:
        return executor.check_deduction(context["output"], value).correct
    if task_type is TaskType.ABDUCTION:
        return executor.check_abduction(context["program"], context["output"], value).correct
    split = len(context["inputs"]) // 2
    return executor.check_induction(value, context["inputs"][split:], context["outputs"][split:]).correct


def rates(rows: list[dict[str, Any]], reader: Reader, executor: Executor) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {}
    by_kind: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        by_kind[row["kind"]].append(row)
    for kind in KINDS:
        members = by_kind.get(kind, [])
        if not members:
            continue
        task_type, role = parse_kind(kind)
        readings = [reader(task_type, role, row["text"]) for row in members]
        out[kind] = {
            "rows": len(members),
            "format_ok": fmean(float(r[0]) for r in readings),
            "extractable": fmean(float(r[1]) for r in readings),
            "valid": fmean(float(executor_valid(executor, kind, row, r[0], r[2]))
                           for row, r in zip(members, readings)),
            "cut": fmean(float(row["finish_reason"] == "length") for row in members),
        }
    return out


def cut_at(row: dict[str, Any], budget: int) -> bool:
    """Whether the response would be cut at `budget` tokens (a response of exactly `budget` tokens that ended with
    its EOS is not cut)."""
    tokens = row["completion_tokens"]
    return tokens > budget or (tokens == budget and row["finish_reason"] == "length")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("corpus", type=Path)
    parser.add_argument("--old-rules", type=Path, help="a checkout of the commit with the old parser")
    parser.add_argument("--budgets", type=int, nargs="*", default=[512, 768, 1024, 1280, 1536])
    args = parser.parse_args()
    rows = [json.loads(line) for line in args.corpus.read_text().splitlines() if line.strip()]
    limit = max(row["max_new_tokens"] for row in rows)
    old = old_reader(args.old_rules) if args.old_rules else None
    with Executor(workers=2) as executor:
        new_rates = rates(rows, new_reader, executor)
        old_rates = rates(rows, old, executor) if old else {}
    print(f"corpus {args.corpus.name}: {len(rows)} responses, sampled at T = 1.0 with at most {limit} tokens")
    header = f"| kind | rows | format-OK | extractable | executor-valid | cut at {limit} |"
    print(header.replace("format-OK | extractable | executor-valid", "format-OK (old → new) | extractable (old → new) "
                         "| executor-valid (old → new)" if old else "format-OK | extractable | executor-valid"))
    print("|" + "---|" * 6)
    for kind, new in new_rates.items():
        cells = []
        for key in ("format_ok", "extractable", "valid"):
            cells.append(f"{old_rates[kind][key]:.2f} → {new[key]:.2f}" if old else f"{new[key]:.2f}")
        print(f"| {kind} | {int(new['rows'])} | " + " | ".join(cells) + f" | {new['cut']:.2f} |")
    print()
    print("| budget | " + " | ".join(k for k in KINDS if k in new_rates) + " | all | mean generated tokens |")
    print("|" + "---|" * (len(new_rates) + 3))
    for budget in sorted(set(args.budgets)):
        if budget > limit:
            continue
        shares = [fmean(float(cut_at(row, budget)) for row in rows if row["kind"] == kind)
                  for kind in KINDS if kind in new_rates]
        every = fmean(float(cut_at(row, budget)) for row in rows)
        mean_tokens = fmean(min(row["completion_tokens"], budget) for row in rows)
        print(f"| {budget} | " + " | ".join(f"{share:.2f}" for share in shares) + f" | {every:.2f} | "
              f"{mean_tokens:.0f} |")


if __name__ == "__main__":
    main()
