"""Local engine figures on this machine: sampling throughput and what a model proposes with the real prompt.

    .venv/bin/python bench/inference.py speed --model tiny|smollm2|qwen-coder-0.5b [--batch 8] [--max-new-tokens 64]
    .venv/bin/python bench/inference.py proposals --model qwen-coder-0.5b [--n 8] [--max-new-tokens 512]
    .venv/bin/python bench/inference.py threads --model qwen-coder-0.5b [--batch 6] [--busy 0,2]

`speed` samples `batch` completions of one deduction proposer prompt at temperature 1 and prints output tokens/s
summed over the batch (prefill included), and the ratio against batch 1 measured in the same run (the baseline).
`proposals` samples n deduction proposals (paper Fig 35 prompt, K=6 references from the shipped seed triplets), then
counts how many parse (services.algorithm.parsing) and how many the sandboxed executor validates.
`threads` measures generation tokens/s per torch thread count (1 .. cores), with the machine otherwise idle and with
`busy` processes spinning beside it (what the executor's sandbox workers do while they check answers); the baseline
is one thread on the idle machine, measured in the same run. It is the measurement behind `AZR_TORCH_THREADS`'s rule.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))
from services.settings.profiles import PACKAGED_SEED_FILES  # noqa: E402

SEEDS = PACKAGED_SEED_FILES[0]  # the authors' seed triplets shipped with the package


def _engine(model: str, seed: int):  # noqa: ANN202 - bench script
    from services.inference.local_engine import LocalEngine
    from services.inference.model_registry import resolve_model

    return LocalEngine(resolve_model(model), seed=seed)


def _proposer_prompt_ids(engine) -> list[int]:  # noqa: ANN001
    from services.algorithm.prompts import ReferenceTriplet, deduction_proposer_prompt

    rows = [json.loads(line) for line in SEEDS.read_text().splitlines()[:6]]
    references = [ReferenceTriplet(program=r["snippet"], input=r["input"], output=r["output"]) for r in rows]
    return engine.prompt_ids(deduction_proposer_prompt(references))


def _solver_prompt_ids(engine) -> list[int]:  # noqa: ANN001
    """A short prompt (a deduction solver prompt, a few hundred tokens), so decoding rather than prefill dominates."""
    from services.algorithm.prompts import deduction_solver_prompt

    row = json.loads(SEEDS.read_text().splitlines()[1])
    return engine.prompt_ids(deduction_solver_prompt(row["snippet"], row["input"]))


def _tokens_per_s(engine, prompt: list[int], batch: int,  # noqa: ANN001
                  max_new_tokens: int) -> tuple[float, int, float, float]:
    """(tokens/s, tokens, wall s, CPU s of this process): CPU time shows how much of the wall time was ours on a
    machine shared with other work."""
    from services.ports import SamplingParams

    started, cpu_started = time.perf_counter(), time.process_time()
    out = engine.generate([prompt], SamplingParams(max_new_tokens=max_new_tokens, temperature=1.0, n=batch, seed=0))
    wall, cpu = time.perf_counter() - started, time.process_time() - cpu_started
    tokens = sum(len(c.output_ids) for c in out[0])
    return tokens / wall, tokens, wall, cpu


def speed(args: argparse.Namespace) -> None:
    """Tokens/s at batch `args.batch` against batch 1."""
    engine = _engine(args.model, 0)
    prompt = _solver_prompt_ids(engine) if args.short_prompt else _proposer_prompt_ids(engine)
    _tokens_per_s(engine, prompt, 1, 4)  # warm-up
    base, base_tokens, base_wall, _ = _tokens_per_s(engine, prompt, 1, args.max_new_tokens)
    rate, tokens, wall, cpu = _tokens_per_s(engine, prompt, args.batch, args.max_new_tokens)
    print(json.dumps({"model": args.model, "prompt_tokens": len(prompt), "max_new_tokens": args.max_new_tokens,
                      "batch": args.batch, "tokens": tokens, "wall_s": round(wall, 2), "cpu_s": round(cpu, 2),
                      "load_avg_1m": os.getloadavg()[0],
                      "tokens_per_s": round(rate, 1), "batch1_tokens_per_s": round(base, 1),
                      "batch1_tokens": base_tokens, "batch1_wall_s": round(base_wall, 2),
                      "ratio_vs_batch1": round(rate / base, 2), "threads": __import__("torch").get_num_threads()}))


def _spin(stop_at: float) -> None:
    """A CPU-bound loop until `stop_at` (a stand-in for a sandbox worker running a program)."""
    while time.time() < stop_at:
        sum(i * i for i in range(10_000))


def threads(args: argparse.Namespace) -> None:
    """Tokens/s for each torch thread count, idle and beside `busy` spinning processes."""
    import multiprocessing

    import torch

    engine = _engine(args.model, 0)
    prompt = _solver_prompt_ids(engine)
    _tokens_per_s(engine, prompt, 1, 4)  # warm-up
    cores = len(os.sched_getaffinity(0))
    rows = []
    for busy in [int(b) for b in args.busy.split(",")]:
        for count in range(1, cores + 1):
            torch.set_num_threads(count)
            spinners = [multiprocessing.Process(target=_spin, args=(time.time() + 3600,)) for _ in range(busy)]
            for spinner in spinners:
                spinner.start()
            try:
                rate, tokens, wall, cpu = _tokens_per_s(engine, prompt, args.batch, args.max_new_tokens)
            finally:
                for spinner in spinners:
                    spinner.kill()
                    spinner.join()
            rows.append({"busy": busy, "threads": count, "tokens": tokens, "wall_s": round(wall, 1),
                         "tokens_per_s": round(rate, 2)})
    base = next(r["tokens_per_s"] for r in rows if r["busy"] == 0 and r["threads"] == 1) if any(
        r["busy"] == 0 and r["threads"] == 1 for r in rows) else rows[0]["tokens_per_s"]
    print(f"{args.model}, batch {args.batch}, {args.max_new_tokens} new tokens, {cores} cores; baseline: "
          f"1 thread, nothing else running ({base} tok/s)")
    print("| busy processes | torch threads | tokens/s | vs baseline |")
    print("|---|---|---|---|")
    for row in rows:
        print(f"| {row['busy']} | {row['threads']} | {row['tokens_per_s']} | {row['tokens_per_s'] / base:.2f}× |")


def proposals(args: argparse.Namespace) -> None:
    """Sample deduction proposals, parse and validate them; print each outcome and the counts."""
    from executor_svc.executor import Executor
    from services.algorithm.parsing import ProgramProposal, read_response
    from services.algorithm.task_types import Role, TaskType
    from services.ports import SamplingParams

    engine = _engine(args.model, args.seed)
    prompt = _proposer_prompt_ids(engine)
    started = time.perf_counter()
    out = engine.generate([prompt], SamplingParams(max_new_tokens=args.max_new_tokens, temperature=1.0, n=args.n,
                                                   seed=args.seed))[0]
    wall = time.perf_counter() - started
    parsed, valid = 0, 0
    with Executor(workers=2) as executor:
        for index, completion in enumerate(out):
            reading = read_response(TaskType.DEDUCTION, Role.PROPOSE, completion.text)
            proposal = reading.extracted
            if not isinstance(proposal, ProgramProposal):
                print(json.dumps({"sample": index, "tokens": len(completion.output_ids),
                                  "finish": completion.finish_reason, "format_ok": reading.format_ok,
                                  "parse": reading.failure, "text": completion.text}))
                continue
            parsed += 1
            result = executor.validate_proposal(proposal.program, proposal.input)
            valid += result.status.value == "ok"
            print(json.dumps({"sample": index, "tokens": len(completion.output_ids), "finish": completion.finish_reason,
                              "format_ok": reading.format_ok, "parse": "ok", "validation": result.status.value,
                              "output": result.output, "program": proposal.program, "input": proposal.input}))
    print(json.dumps({"model": args.model, "n": args.n, "parsed": parsed, "valid": valid,
                      "generation_wall_s": round(wall, 1),
                      "tokens": sum(len(c.output_ids) for c in out)}))


def main() -> None:
    """Command line."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    speed_p = sub.add_parser("speed")
    speed_p.add_argument("--model", default="tiny")
    speed_p.add_argument("--batch", type=int, default=8)
    speed_p.add_argument("--max-new-tokens", type=int, default=64)
    speed_p.add_argument("--short-prompt", action="store_true", help="a solver prompt instead of a proposer prompt")
    speed_p.set_defaults(run=speed)
    threads_p = sub.add_parser("threads")
    threads_p.add_argument("--model", default="qwen-coder-0.5b")
    threads_p.add_argument("--batch", type=int, default=6)
    threads_p.add_argument("--max-new-tokens", type=int, default=64)
    threads_p.add_argument("--busy", default="0,2", help="comma-separated counts of spinning processes beside it")
    threads_p.set_defaults(run=threads)
    prop_p = sub.add_parser("proposals")
    prop_p.add_argument("--model", default="qwen-coder-0.5b")
    prop_p.add_argument("--n", type=int, default=8)
    prop_p.add_argument("--max-new-tokens", type=int, default=512)
    prop_p.add_argument("--seed", type=int, default=0)
    prop_p.set_defaults(run=proposals)
    args = parser.parse_args()
    args.run(args)


if __name__ == "__main__":
    main()
