"""Sample the real-model-text corpus the reading tests pin (run once; its output is committed beside this file).

    python tests/data/model_text/sample_corpus.py --model qwen-coder-0.5b --per-kind 8 --batch 8 \
        --max-new-tokens 1024 --engine torch --out tests/data/model_text/qwen-coder-0.5b.jsonl

The step-0 corpora of the self-play issue's model choice (both models, the same prompts, the llama.cpp engine):

    python tests/data/model_text/sample_corpus.py --model qwen-coder-1.5b --per-kind 24 --batch 24 \
        --kinds propose_deduction,propose_abduction,propose_induction --max-new-tokens 768 \
        --out tests/data/model_text/step0-qwen-coder-1.5b.jsonl
    python tests/data/model_text/sample_corpus.py --model qwen-coder-1.5b --per-kind 16 --batch 16 \
        --kinds solve_deduction,solve_abduction,solve_induction --max-new-tokens 768 \
        --out tests/data/model_text/step0-qwen-coder-1.5b.jsonl

(The committed 1.5B corpus: these two commands, llama.cpp on 2 AVX2 cores, alone: the 24 induction proposals 1,026 s,
the 48 solver rows 1,608 s, prompt prefill included. The 0.5B on the same prompts, step0-qwen-coder-0.5b.jsonl: the
same commands with `--model qwen-coder-0.5b` and that `--out`; the 72 proposals 2,228 s, the 48 solver rows 966 s.)

For each of the six (task type x role) groups it builds `--per-kind` step-0 prompts the way a run seeded from the
authors' seed files would (deduction/abduction proposers: K = 6 references drawn from the seed triplets, prompts over
the token limit redrawn; induction proposer: one seed program; solvers: seed tasks), samples one response per prompt
at T = 1.0 / top-p 1.0 with its own seed, and appends one JSON row per response:

    {"kind": "propose_deduction", "model": ..., "seed": ..., "context": {...}, "text": ..., "completion_tokens": ...,
     "finish_reason": "stop" | "length", "max_new_tokens": ...}

`context` holds what the prompt showed and what an answer is checked against (references, program, gold values), so
the corpus can be replayed through the executor. The file is appended batch by batch; a rerun skips the rows that are
already there, so an interrupted sampling resumes.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path
from typing import Any

import torch

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))

from services.algorithm.parsing import read_response  # noqa: E402
from services.algorithm.prompts import (  # noqa: E402
    ReferenceTriplet,
    induction_solver_prompt,
    proposer_prompt,
    solver_prompt,
)
from services.algorithm.task_types import TaskType  # noqa: E402
from services.inference.engine_choice import InProcessEngine, build_local_engine  # noqa: E402
from services.inference.model_registry import resolve_model  # noqa: E402
from services.ports import SamplingParams  # noqa: E402
from services.reporting.response_reading import parse_kind, reading_row  # noqa: E402
from services.settings import Settings  # noqa: E402

SEEDS = ROOT.parent / "shared" / "data" / "azr_seeds"
KINDS = ("propose_deduction", "propose_abduction", "propose_induction",
         "solve_deduction", "solve_abduction", "solve_induction")


def load_rows(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def contexts(kind: str, count: int, rng: random.Random, io_rows: list[dict[str, Any]],
             f_rows: list[dict[str, Any]], engine: InProcessEngine, max_prompt_tokens: int, k: int, num_inputs: int
             ) -> list[tuple[dict[str, Any], str]]:
    """(context, task instruction) pairs for one kind."""
    out: list[tuple[dict[str, Any], str]] = []
    if kind in ("propose_deduction", "propose_abduction"):
        task_type = TaskType.DEDUCTION if kind == "propose_deduction" else TaskType.ABDUCTION
        while len(out) < count:
            for _ in range(100):  # redraw references until the prompt fits (the authors' content_max_length rule)
                refs = rng.sample(io_rows, k)
                triplets = [ReferenceTriplet(r["snippet"], r["input"], r["output"]) for r in refs]
                instruction = proposer_prompt(task_type, triplets, num_inputs=num_inputs)
                if len(engine.prompt_ids(instruction)) <= max_prompt_tokens:
                    break
            out.append(({"references": [{"program": t.program, "input": t.input, "output": t.output}
                                        for t in triplets]}, instruction))
    elif kind == "propose_induction":
        for row in rng.sample(io_rows, count):
            instruction = proposer_prompt(TaskType.INDUCTION, [ReferenceTriplet(row["snippet"], row["input"],
                                                                                row["output"])],
                                          num_inputs=num_inputs)
            out.append(({"program": row["snippet"]}, instruction))
    elif kind in ("solve_deduction", "solve_abduction"):
        task_type = TaskType.DEDUCTION if kind == "solve_deduction" else TaskType.ABDUCTION
        for row in rng.sample(io_rows[1:], count):  # not the identity triplet
            instruction = solver_prompt(task_type, ReferenceTriplet(row["snippet"], row["input"], row["output"]))
            out.append(({"program": row["snippet"], "input": row["input"], "output": row["output"]}, instruction))
    else:
        for row in rng.sample(f_rows[1:], count):
            split = len(row["inputs"]) // 2
            instruction = induction_solver_prompt(list(zip(row["inputs"][:split], row["outputs"][:split])),
                                                  row["message"])
            out.append(({"program": row["snippet"], "inputs": row["inputs"], "outputs": row["outputs"],
                         "message": row["message"]}, instruction))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="qwen-coder-0.5b")
    parser.add_argument("--per-kind", type=int, default=8)
    parser.add_argument("--kinds", default=",".join(KINDS))
    parser.add_argument("--max-new-tokens", type=int, default=1024)
    parser.add_argument("--max-prompt-tokens", type=int, default=2048)
    parser.add_argument("--batch", type=int, default=16, help="prompts per generate call (one decoding batch: "
                        "finished rows leave it, so one long row sets its time; larger batches amortise that)")
    parser.add_argument("--seed", type=int, default=2026)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--engine", default="auto", choices=["auto", "torch", "llama-cpp"],
                        help="the in-process engine (AZR_LOCAL_ENGINE); the samples' distribution is the model's either"
                             " way, up to the engine's rounding")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)

    io_rows = load_rows(SEEDS / "7b_coder_seed_io.jsonl")
    f_rows = load_rows(SEEDS / "7b_coder_code_f_seed_io.jsonl")
    settings = Settings(local_engine=args.engine, device="cpu", seed=args.seed, torch_threads=args.threads)
    engine = build_local_engine(resolve_model(args.model), settings.inference, settings.run, max_batch_rows=args.batch,
                                say=print)
    done: dict[str, int] = {}
    if args.out.exists():
        for row in load_rows(args.out):
            done[row["kind"]] = done.get(row["kind"], 0) + 1
    for kind in args.kinds.split(","):
        rng = random.Random(args.seed * 100 + KINDS.index(kind))
        pairs = contexts(kind, args.per_kind, rng, io_rows, f_rows, engine, args.max_prompt_tokens, 6, 10)
        start = done.get(kind, 0)
        for first in range(start, len(pairs), args.batch):
            chunk = pairs[first:first + args.batch]
            prompts = [engine.prompt_ids(instruction) for _, instruction in chunk]
            began = time.perf_counter()
            rows = []
            batch_seed = args.seed * 10_000 + KINDS.index(kind) * 1_000 + first  # one generator per batch call
            sampling = SamplingParams(max_new_tokens=args.max_new_tokens, temperature=1.0, top_p=1.0, n=1,
                                      seed=batch_seed)
            completions = engine.generate(prompts, sampling)
            for (context, _), prompt, group in zip(chunk, prompts, completions):
                completion = group[0]
                rows.append({"kind": kind, "model": args.model, "engine": str(engine.model_info()["dtype"]),
                         "seed": batch_seed, "context": context,
                             "prompt_tokens": len(prompt), "text": completion.text,
                             "completion_tokens": len(completion.output_ids),
                             "finish_reason": completion.finish_reason, "max_new_tokens": args.max_new_tokens,
                             # the reading under today's rules, pinned (tests/services/algorithm/test_model_text_corpus)
                             "expected": reading_row(read_response(*parse_kind(kind), completion.text))})
            with args.out.open("a") as handle:
                for row in rows:
                    handle.write(json.dumps(row) + "\n")
            tokens = sum(r["completion_tokens"] for r in rows)
            print(f"{kind} rows {first}-{first + len(rows) - 1}: {tokens} tokens in "
                  f"{time.perf_counter() - began:.0f}s", flush=True)


if __name__ == "__main__":
    main()
