"""Executor throughput on the CRUXEval programs: our backends against two baselines measured in the same run.

Baselines (each does the same work as one of our validations: run f(input) twice and compare):
- A: a fresh `python3` per execution (two interpreters per validation, hash seeds 0 and 1).
- B: one reused interpreter in a single-worker pool, exec'ing the program twice in one process — what the
  authors' executor does (no isolation between tasks; a poisoned builtin leaks into the next task).

Targets (issue #3): process >= 8x A and >= 1x B while isolating every task; docker >= 0.5x process.

    .venv/bin/python bench/executor.py [--limit 200] [--workers 2] [--backends process,docker]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))
CRUXEVAL = Path(os.environ.get("AZR_SHARED_DIR", REPO_ROOT.parent / "shared")) / "data" / "cruxeval.jsonl"
INTERPRETER = "/usr/bin/python3" if Path("/usr/bin/python3").exists() else sys.executable

RUN_SNIPPET = "import sys\nexec(sys.stdin.read())\n"


def load_rows(limit: int) -> list[dict[str, str]]:
    with CRUXEVAL.open() as lines:
        return [json.loads(line) for _, line in zip(range(limit), lines)]


def program_text(row: dict[str, str]) -> str:
    return f"{row['code']}\nprint(repr(f({row['input']})))\n"


def fresh_interpreter_validation(row: dict[str, str]) -> bool:
    """Baseline A: two fresh interpreters (hash seeds 0 and 1), outputs compared."""
    outputs = []
    for seed in ("0", "1"):
        completed = subprocess.run(
            [INTERPRETER, "-s", "-S", "-c", RUN_SNIPPET],
            input=program_text(row),
            capture_output=True,
            text=True,
            timeout=10,
            env={"PYTHONHASHSEED": seed, "PATH": "/usr/bin:/bin"},
        )
        outputs.append(completed.stdout)
    return outputs[0] == outputs[1] and completed.returncode == 0


def reused_interpreter_validation(code: str, argument: str) -> bool:
    """Baseline B (runs inside the pool's one reused process): exec twice, compare, as the authors do."""
    results = []
    for _ in range(2):
        namespace: dict[str, object] = {}
        exec(code, namespace)  # noqa: S102 - this IS the unsafe baseline being measured
        results.append(repr(eval(f"f({argument})", namespace)))  # noqa: S307
    return results[0] == results[1]


def measure(label: str, count: int, run: callable) -> dict[str, float | str]:
    started = time.perf_counter()
    ok = run()
    seconds = time.perf_counter() - started
    return {"backend": label, "validations": count, "ok": ok, "seconds": round(seconds, 3), "per_s": round(count / seconds, 1)}


def bench_baseline_a(rows: list[dict[str, str]], workers: int) -> dict:
    def run() -> int:
        with ThreadPoolExecutor(max_workers=workers) as pool:
            return sum(pool.map(fresh_interpreter_validation, rows))

    return measure(f"A: fresh python3 per execution ({workers} in parallel)", len(rows), run)


def bench_baseline_b(rows: list[dict[str, str]]) -> dict:
    def run() -> int:
        with ProcessPoolExecutor(max_workers=1) as pool:
            return sum(pool.map(reused_interpreter_validation, [r["code"] for r in rows], [r["input"] for r in rows]))

    return measure("B: one reused interpreter, 1-worker pool (authors')", len(rows), run)


def bench_ours(rows: list[dict[str, str]], backend: str, workers: int) -> dict:
    from executor_svc.executor import Executor
    from services.execution import ExecStatus
    from services.settings import Settings

    settings = Settings(executor_backend=backend, executor_workers=workers)
    with Executor.from_settings(settings) as executor:
        executor.validate_proposal(rows[0]["code"], rows[0]["input"])  # warm the pool: startup is not throughput

        def run() -> int:
            with ThreadPoolExecutor(max_workers=workers * 2) as pool:
                results = pool.map(lambda r: executor.validate_proposal(r["code"], r["input"]), rows)
                return sum(result.status == ExecStatus.OK for result in results)

        label = f"ours: {backend} ({workers} workers, isolation: {getattr(executor, 'isolation', backend)})"
        return measure(label, len(rows), run)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--limit", type=int, default=200, help="CRUXEval rows to validate per contender")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--backends", default="process,docker")
    args = parser.parse_args()
    rows = load_rows(args.limit)

    table = [bench_baseline_a(rows, args.workers), bench_baseline_b(rows)]
    for backend in [b for b in args.backends.split(",") if b]:
        try:
            table.append(bench_ours(rows, backend, args.workers))
        except Exception as error:  # report and go on: one missing engine must not hide the other figures
            table.append({"backend": f"ours: {backend}", "validations": 0, "ok": 0, "seconds": 0, "per_s": 0, "error": str(error)[:200]})

    base_a, base_b = table[0]["per_s"], table[1]["per_s"]
    process = next((row["per_s"] for row in table if row["backend"].startswith("ours: process")), 0)
    print(f"executor benchmark: {len(rows)} CRUXEval validations each, {args.workers} cores' worth of workers\n")
    print("| contender | validations/s | ok | vs A | vs B | vs process |")
    print("|---|---|---|---|---|---|")
    for row in table:
        ratio = lambda base: f"{row['per_s'] / base:.2f}x" if base else "-"  # noqa: E731
        note = f" ({row['error']})" if row.get("error") else ""
        print(f"| {row['backend']}{note} | {row['per_s']} | {row['ok']}/{row['validations']} | {ratio(base_a)} | {ratio(base_b)} | {ratio(process)} |")


if __name__ == "__main__":
    main()
