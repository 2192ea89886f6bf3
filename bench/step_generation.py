"""A self-play step's generation on the local engine: today's engine against the one it replaced, in one run.

    .venv/bin/python bench/step_generation.py [--model qwen-coder-0.5b] [--batch-size 2] [--max-new-tokens 768]
                                              [--repeats 1] [--ignore-eos] [--int8 [--per-channel]
                                              [--keep-float NAME ...]] [--out bench/results/step_generation.json]
    .venv/bin/python bench/step_generation.py --int8-batch-sizes 2 4 [--repeats 2] [--out FILE]
                                              [--per-channel] [--keep-float NAME ...]   # the learning preset's engine

The prompts are a real step's at step 0: B proposer prompts per task type (K = 6 references drawn from the
authors' seed triplets shipped in the package; induction shows one program) and B solver prompts per task type
(seed triplets), built by the same functions the step uses. Two ways of generating them, same sampling (T = 1):

- baseline (the engine before): the proposers in one call, then the solvers in a second; each call prefilled as one
  left-padded batch (every pad position computed), each decoded until its longest row stops.
- now: proposers and solvers in one call (the step answers its solve batch's fill with the proposers), each prompt
  prefilled on its own from the longest prefix it shares with an earlier one (services/inference/prefill.py).

With `--int8`, a third way: "now" on an engine whose Linear layers are int8 (`local_engine_int8`; float32 otherwise;
`--per-channel` and `--keep-float` give it the learning preset's int8 form).
It prints wall seconds, prompt positions computed, tokens generated and the speedup (baseline / now) per repeat and
the median. `--ignore-eos` decodes every row to the cap (no tail: isolates prefill and batching); without it rows
stop where the model stops, as in a run (the tail a batch waits for is part of what is measured).

`--int8-batch-sizes 2 4 ...` times only the int8 engine's "now" generation of a step at each B (the first is the
baseline of the ratio), what bench/signal_odds.py needs as `--step-seconds` to rank batch sizes; `--per-channel` and
`--keep-float` give that engine the learning preset's int8 form (`local_engine_int8_per_channel`, `_keep_float`).
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))

import torch  # noqa: E402

from services.algorithm.prompts import ReferenceTriplet  # noqa: E402
from services.algorithm.task_types import TaskType  # noqa: E402
from services.inference import decoding  # noqa: E402
from services.inference.local_engine import LocalEngine, engine_dtype  # noqa: E402
from services.inference.model_registry import resolve_model  # noqa: E402
from services.inference.prefill import (  # noqa: E402
    PrefilledBatch,
    PrefillProgress,
    prefill_batch,
    shared_prefix_plan,
)
from services.ports import ProposeContext, SamplingParams  # noqa: E402
from services.records import InductionSolveTask, IOSolveTask  # noqa: E402
from services.rollouts.proposing import proposer_instruction  # noqa: E402
from services.rollouts.solving import solver_instruction  # noqa: E402

SEEDS = REPO_ROOT / "services" / "data" / "seeds"


def seed_rows(name: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (SEEDS / name).read_text().splitlines() if line.strip()]


def step_prompts(engine: LocalEngine, batch_size: int, rng: random.Random) -> tuple[list[list[int]], list[list[int]]]:
    """(proposer prompts, solver prompts) of one step at step 0, as token ids."""
    triplets = seed_rows("7b_coder_seed_io.jsonl")
    programs = seed_rows("7b_coder_code_f_seed_io.jsonl")
    refs = [ReferenceTriplet(r["snippet"], r["input"], r["output"]) for r in triplets]
    proposers = []
    for task_type in TaskType:
        for _ in range(batch_size):
            shown = [rng.choice(refs)] if task_type is TaskType.INDUCTION else rng.sample(refs, 6)
            proposers.append(proposer_instruction(task_type, ProposeContext(shown), 10))
    solvers = []
    for _ in range(batch_size):
        row = rng.choice(triplets)
        solvers.append(solver_instruction(TaskType.DEDUCTION, IOSolveTask(program=row["snippet"], input=row["input"],
                                                                          output=row["output"])))
        row = rng.choice(triplets)
        solvers.append(solver_instruction(TaskType.ABDUCTION, IOSolveTask(program=row["snippet"], input=row["input"],
                                                                          output=row["output"])))
        row = rng.choice(programs)
        solvers.append(solver_instruction(TaskType.INDUCTION, InductionSolveTask(
            program=row["snippet"], inputs=row["inputs"], outputs=row["outputs"], message=row["message"])))
    return [engine.prompt_ids(text) for text in proposers], [engine.prompt_ids(text) for text in solvers]


def padded_prefill_batch(forward: Callable[..., Any], prompts: Sequence[Sequence[int]], *, chunk_tokens: int,
                         before_forward: Callable[[], None], cache_config: Any, device: torch.device,
                         on_progress: Callable[[PrefillProgress], None] | None = None) -> PrefilledBatch:
    """The prefill the engine had before: the prompts left-padded into one batch, every position computed."""
    width = max(len(p) for p in prompts)
    ids = torch.zeros((len(prompts), width), dtype=torch.long, device=device)
    mask = torch.zeros((len(prompts), width), dtype=torch.long, device=device)
    for row, prompt in enumerate(prompts):
        ids[row, width - len(prompt):] = torch.tensor(list(prompt))
        mask[row, width - len(prompt):] = 1
    positions = (mask.cumsum(-1) - 1).clamp(min=0)
    before_forward()
    cache, logits = forward(None, input_ids=ids, attention_mask=mask, position_ids=positions)
    return PrefilledBatch(cache=cache, last_logits=logits, attention_mask=mask, positions=positions)


def int8_engine(model_dir: Path, args: argparse.Namespace) -> LocalEngine:
    """The engine with int8 Linear layers, in the form `--per-channel` and `--keep-float` ask for."""
    return LocalEngine(model_dir, device="cpu", seed=args.seed, int8_linear=True, int8_keep_float=args.keep_float,
                       int8_per_channel=args.per_channel)


def timed(engine: LocalEngine, calls: list[list[list[int]]], sampling: SamplingParams,
          prefill: Callable[..., PrefilledBatch]) -> dict[str, float]:
    """Wall seconds and tokens of generating `calls` one after the other with `prefill`."""
    decoding.prefill_batch = prefill  # type: ignore[assignment]
    tokens = 0
    started = time.perf_counter()
    for index, prompts in enumerate(calls):
        out = engine.generate(prompts, sampling.model_copy(update={"seed": (sampling.seed or 0) + 1000 * index}))
        tokens += sum(len(c.output_ids) for group in out for c in group)
    return {"seconds": round(time.perf_counter() - started, 2), "tokens": tokens}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="qwen-coder-0.5b")
    parser.add_argument("--batch-size", type=int, default=2)
    parser.add_argument("--max-new-tokens", type=int, default=768)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--ignore-eos", action="store_true")
    parser.add_argument("--int8", action="store_true", help="also time `now` with int8 Linear layers")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--int8-batch-sizes", type=int, nargs="+", default=[],
                        help="time only the int8 engine's step generation at each of these B")
    parser.add_argument("--per-channel", action="store_true",
                        help="the int8 engine (--int8 or --int8-batch-sizes): one weight scale per output channel")
    parser.add_argument("--keep-float", nargs="*", default=[], metavar="NAME",
                        help="the int8 engine: Linear layers left float32 (names matched at a dot)")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    if args.int8_batch_sizes:
        batch_sizes_int8(args)
        return

    model_dir = resolve_model(args.model)
    dtype = engine_dtype("auto", torch.device("cpu"))
    engine = LocalEngine(model_dir, device="cpu", dtype=dtype, seed=args.seed)
    int8 = int8_engine(model_dir, args) if args.int8 else None
    if args.ignore_eos:
        for each in (engine, int8):
            if each is not None:
                each._eos_ids = set()  # every row to the cap: no tail
    proposers, solvers = step_prompts(engine, args.batch_size, random.Random(args.seed))
    sampling = SamplingParams(max_new_tokens=args.max_new_tokens, temperature=1.0, top_p=1.0, seed=args.seed,
                              stop=[])
    padded_positions = sum(len(calls) * max(len(p) for p in calls) for calls in (proposers, solvers))
    shared_positions = sum(len(p) - taken for p, (_, taken) in
                           zip(proposers + solvers, shared_prefix_plan(proposers + solvers)))
    int8_form = f"; int8 engine {int8.model_info()['dtype']}" if int8 is not None else ""
    print(f"{args.model} ({str(dtype).removeprefix('torch.')}{int8_form}), {torch.get_num_threads()} threads; "
          f"{len(proposers)} proposer + {len(solvers)} solver prompts, {args.max_new_tokens} new tokens at most"
          f"{' (EOS ignored)' if args.ignore_eos else ''}; prompt positions computed: baseline {padded_positions}, "
          f"now {shared_positions}")
    runs = []
    for repeat in range(args.repeats):
        baseline = timed(engine, [proposers, solvers], sampling, padded_prefill_batch)
        now = timed(engine, [proposers + solvers], sampling, prefill_batch)
        speedup = baseline["seconds"] / now["seconds"]
        run: dict[str, Any] = {"baseline": baseline, "now": now, "speedup": round(speedup, 2)}
        line = (f"repeat {repeat + 1}: baseline {baseline['seconds']:.1f} s ({baseline['tokens']} tokens), "
                f"now {now['seconds']:.1f} s ({now['tokens']} tokens): {speedup:.2f}x")
        if int8 is not None:
            now_int8 = timed(int8, [proposers + solvers], sampling, prefill_batch)
            run |= {"now_int8": now_int8, "speedup_int8": round(baseline["seconds"] / now_int8["seconds"], 2)}
            line += f"; now with int8 Linear {now_int8['seconds']:.1f} s ({now_int8['tokens']} tokens): " \
                    f"{run['speedup_int8']:.2f}x"
        runs.append(run)
        print(line)
    median = statistics.median(run["speedup"] for run in runs)
    print(f"median speedup of a step's generation: {median:.2f}x")
    median_int8 = statistics.median(run["speedup_int8"] for run in runs) if int8 is not None else None
    if median_int8 is not None:
        print(f"median speedup with int8 Linear layers: {median_int8:.2f}x")
    if args.out:
        args.out.write_text(json.dumps({"model": args.model, "dtype": str(dtype), "threads": torch.get_num_threads(),
                                        "int8_engine": int8.model_info()["dtype"] if int8 is not None else None,
                                        "batch_size": args.batch_size, "max_new_tokens": args.max_new_tokens,
                                        "ignore_eos": args.ignore_eos, "prompt_positions": {
                                            "baseline": padded_positions, "now": shared_positions},
                                        "runs": runs, "median_speedup": median,
                                        "median_speedup_int8": median_int8}, indent=2) + "\n")


def batch_sizes_int8(args: argparse.Namespace) -> None:
    """The int8 engine's generation of one step at each B in `args.int8_batch_sizes`, `args.repeats` times (B
    interleaved within a repeat, so load drifts hit every size alike); seconds and the ratio to the first B."""
    engine = int8_engine(resolve_model(args.model), args)
    form = str(engine.model_info()["dtype"])
    sampling = SamplingParams(max_new_tokens=args.max_new_tokens, temperature=1.0, top_p=1.0, seed=args.seed,
                              stop=[])
    prompts = {size: step_prompts(engine, size, random.Random(args.seed)) for size in args.int8_batch_sizes}
    print(f"{args.model} ({form}), {torch.get_num_threads()} threads; one step's prompts at B = "
          f"{', '.join(map(str, args.int8_batch_sizes))} (6 B rows each), {args.max_new_tokens} new tokens at most")
    seconds: dict[int, list[float]] = {size: [] for size in args.int8_batch_sizes}
    tokens: dict[int, list[int]] = {size: [] for size in args.int8_batch_sizes}
    for repeat in range(args.repeats):
        for size, (proposers, solvers) in prompts.items():
            run = timed(engine, [proposers + solvers], sampling.model_copy(update={"seed": args.seed + repeat}),
                        prefill_batch)
            seconds[size].append(run["seconds"])
            tokens[size].append(int(run["tokens"]))
            print(f"repeat {repeat + 1}, B = {size}: {run['seconds']:.1f} s, {run['tokens']} tokens")
    first = statistics.median(seconds[args.int8_batch_sizes[0]])
    table = {size: {"median_seconds": statistics.median(seconds[size]), "seconds": seconds[size],
                    "tokens": tokens[size], "ratio": round(statistics.median(seconds[size]) / first, 2)}
             for size in args.int8_batch_sizes}
    for size, row in table.items():
        print(f"B = {size}: median {row['median_seconds']:.1f} s, {row['ratio']:.2f}x B = {args.int8_batch_sizes[0]}")
    if args.out:
        args.out.write_text(json.dumps({"model": args.model, "engine": form, "threads":
                                        torch.get_num_threads(), "max_new_tokens": args.max_new_tokens,
                                        "repeats": args.repeats, "batch_sizes": table}, indent=2) + "\n")


if __name__ == "__main__":
    main()
