"""A step's generation on each CPU engine, in one run: the torch engine the learning preset had (float32 + per-channel
int8 Linear) against the llama.cpp engine with its base as released (Q4_K_M) and requantized (q8_0, q4_0).

    .venv/bin/python bench/engine_compare.py [--model qwen-coder-0.5b] [--max-new-tokens 384] [--batch-size 2]
        [--engines torch-int8 llama-release llama-q8_0 llama-q4_0] [--gap-tokens 1500] [--out FILE]

The prompts are a real step's at step 0 (bench/step_generation.py's `step_prompts`: B proposer prompts per task type
with K = 6 references from the shipped seed triplets, B solver prompts per type) plus the learnability samples of two
valid proposals (n = 8 each), generated as a step does: proposers and solvers in one call, then the learnability
call. Same sampling for every engine (T = 1, per-sample seeds); each row stops where the model stops. Per engine:
- wall seconds of the step's two calls, tokens generated, tokens/s;
- the fraction of this machine's measured ceiling: model FLOPs (2 x parameters per position, prompt positions
  computed plus tokens generated) per second over a 2048^3 GEMM measured here in the same run, in the engine's
  arithmetic (float32 torch.mm; int8 `torch._int_mm` for the int8 and llama.cpp engines, whose dot products are int8);
- the time to take new weights: a LoRA push (r = 16 on every projection, random B) as the engine takes it (merged
  bf16 directory for the torch engine, the PEFT adapter directory for llama.cpp), measured from files on disk;
- the engine/trainer gap: the mean |log pi_engine - log pi_trainer| per sampled token over the first
  `--gap-tokens` sampled tokens, pi_trainer the float32 recomputation the trainer makes (base = the release's
  dequantization, as the trainer's).
Prints a Markdown table (docs/benchmarks.md) and writes the numbers to --out.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))

import torch  # noqa: E402

from bench.step_generation import seed_rows, step_prompts  # noqa: E402
from services.algorithm.task_types import TaskType  # noqa: E402
from services.inference.engine_choice import gguf_for  # noqa: E402
from services.inference.llama_cpp_engine import LlamaCppEngine  # noqa: E402
from services.inference.local_engine import LocalEngine, load_causal_lm  # noqa: E402
from services.inference.model_registry import resolve_model  # noqa: E402
from services.ports import SamplingParams  # noqa: E402
from services.records import IOSolveTask  # noqa: E402
from services.rollouts.solving import solver_instruction  # noqa: E402
from services.settings import Settings  # noqa: E402

PRESET_KEEP_FLOAT = ["layers.2.mlp.down_proj", "layers.3.mlp.down_proj", "layers.5.mlp.down_proj",
                     "layers.21.mlp.down_proj", "layers.22.mlp.down_proj", "layers.23.mlp.down_proj"]
"""configs/learn-cpu.toml's float32 layers of the 0.5B torch int8 engine (other models: none kept)."""
ENGINES = ("torch-int8", "llama-release", "llama-q8_0", "llama-q4_0")


def gemm_ceilings(threads: int) -> dict[str, float]:
    """GFLOP/s of a 2048^3 float32 torch.mm and GOP/s of a 2048^3 int8 product on `threads` threads (best of 3).
    The int8 product is fbgemm's (a dynamically quantized Linear, activations quantized per call): `torch._int_mm`
    has no fast CPU kernel without AVX512-VNNI (1 GOP/s on an AVX2 EPYC)."""
    import warnings

    torch.set_num_threads(threads)
    n = 2048
    out = {}
    a, b = torch.randn(n, n), torch.randn(n, n)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch.ao's deprecation notice
        int8_linear = torch.ao.nn.quantized.dynamic.Linear(n, n)
    for name, run in (("float32", lambda: torch.mm(a, b)), ("int8", lambda: int8_linear(a))):
        run()
        best = min(_seconds(run) for _ in range(5))
        out[name] = round(2 * n ** 3 / best / 1e9, 1)
    return out


def _seconds(run: Any) -> float:
    started = time.perf_counter()
    run()
    return time.perf_counter() - started


def learnability_prompts(engine: Any, count: int, rng: random.Random) -> list[list[int]]:
    """Solver prompts of `count` seed tasks, standing for this step's valid proposals' learnability samples."""
    rows = seed_rows("7b_coder_seed_io.jsonl")
    tasks = [rng.choice(rows) for _ in range(count)]
    return [engine.prompt_ids(solver_instruction(TaskType.DEDUCTION, IOSolveTask(
        program=row["snippet"], input=row["input"], output=row["output"]))) for row in tasks]


def model_parameters(model_dir: Path) -> int:
    """Parameters of the model's matrix products per position (every weight but the input embedding; the LM head
    counted, tied or not)."""
    config = json.loads((model_dir / "config.json").read_text())
    hidden, layers, inter = config["hidden_size"], config["num_hidden_layers"], config["intermediate_size"]
    heads, kv = config["num_attention_heads"], config.get("num_key_value_heads") or config["num_attention_heads"]
    head_dim = hidden // heads
    attention = hidden * heads * head_dim * 2 + hidden * kv * head_dim * 2
    return layers * (attention + 3 * hidden * inter) + hidden * config["vocab_size"]


def build(name: str, model_dir: Path, work: Path) -> Any:
    if name == "torch-int8":
        keep = PRESET_KEEP_FLOAT if "0.5b" in model_dir.name else []
        return LocalEngine(model_dir, device="cpu", dtype=torch.float32, int8_linear=True, int8_per_channel=True,
                           int8_keep_float=keep)
    form = name.removeprefix("llama-")
    return LlamaCppEngine(model_dir, gguf_for(model_dir), base_form=form, work_dir=work,
                          threads=torch.get_num_threads())


def push_dirs(model_dir: Path, work: Path) -> tuple[Path, Path]:
    """(merged bf16 HF directory, PEFT adapter directory) of one LoRA update (r = 16, random B)."""
    from trainer_svc.lora import add_adapters, save_adapters
    from trainer_svc.weight_export import write_serving_weights

    model = load_causal_lm(model_dir, torch.device("cpu"), torch.float32, progress_bar=False)
    model = add_adapters(model, Settings(lora_rank=16, lora_alpha=32.0).trainer.lora, model_dir)
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if "lora_B" in name:
                parameter.copy_(torch.randn(parameter.shape, generator=generator) * 1e-3)
    merged = write_serving_weights(work / "run", model, 1)
    adapter = work / "adapter"
    adapter.mkdir()
    save_adapters(model, adapter)
    del model
    return merged, adapter


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="qwen-coder-0.5b")
    parser.add_argument("--batch-size", type=int, default=2)
    parser.add_argument("--max-new-tokens", type=int, default=384)
    parser.add_argument("--engines", nargs="+", default=list(ENGINES), choices=ENGINES)
    parser.add_argument("--gap-tokens", type=int, default=1500)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()

    threads = torch.get_num_threads()
    ceilings = gemm_ceilings(threads)
    model_dir = resolve_model(args.model)
    params = model_parameters(model_dir)
    work = Path(tempfile.mkdtemp(prefix="engine-compare-"))
    merged, adapter = push_dirs(model_dir, work)
    trainer = LocalEngine(model_dir, device="cpu", dtype=torch.float32)
    print(f"{args.model}: {params / 1e9:.2f} G matrix parameters; {platform.processor() or platform.machine()}, "
          f"{os.cpu_count()} cores, {threads} threads; ceilings {ceilings}")
    rows: list[dict[str, Any]] = []
    for name in args.engines:
        engine = build(name, model_dir, work)
        rng = random.Random(args.seed)
        proposers, solvers = step_prompts(engine, args.batch_size, rng)
        learn = learnability_prompts(engine, 2, rng)
        first = SamplingParams(max_new_tokens=args.max_new_tokens, seed=args.seed)
        second = first.model_copy(update={"n": 8, "seed": args.seed + 1000})
        started = time.perf_counter()
        out = engine.generate(proposers + solvers, first) + engine.generate(learn, second)
        seconds = time.perf_counter() - started
        prompts = proposers + solvers + learn  # out[i] continues prompts[i]
        completions = [(prompts[i], c) for i, group in enumerate(out) for c in group]
        tokens = sum(len(c.output_ids) for _, c in completions)
        positions = sum(len(p) for p in proposers + solvers + learn) + tokens
        fraction = 2 * params * positions / seconds / 1e9 / ceilings["int8"]  # every engine here multiplies in int8
        gap_sum, gap_n = 0.0, 0
        for prompt, completion in completions:
            if gap_n >= args.gap_tokens:
                break
            reference = trainer.forward_logprobs(prompt, completion.output_ids)
            gap_sum += sum(abs(a - b) for a, b in zip(reference, completion.logprobs))
            gap_n += len(reference)
        started = time.perf_counter()
        engine.update_weights(str(merged if name.startswith("torch") else adapter), 1)
        update_s = time.perf_counter() - started
        row = {"engine": name, "form": engine.model_info()["dtype"], "seconds": round(seconds, 1), "tokens": tokens,
               "tokens_per_s": round(tokens / seconds, 1), "ceiling_fraction": round(fraction, 3),
               "update_s": round(update_s, 2), "gap_nats_per_token": round(gap_sum / max(gap_n, 1), 4),
               "gap_tokens": gap_n, "_ceiling": ceilings["int8"]}
        rows.append(row)
        print(json.dumps({k: v for k, v in row.items() if not k.startswith("_")}), flush=True)
        del engine
    again = gemm_ceilings(threads)  # a busy moment at the start must not lower the ceiling: the better of two
    ceilings = {name: max(value, again[name]) for name, value in ceilings.items()}
    for row in rows:
        row["ceiling_fraction"] = round(row["ceiling_fraction"] * row.pop("_ceiling") / ceilings["int8"], 3)
    print(f"ceilings, the better of the start's and the end's: {ceilings}")
    base = rows[0]["seconds"]
    print(f"\n| engine ({args.model}) | step generation | tokens | tok/s | of the {threads}-thread ceiling | "
          "speedup | new weights | gap (nats/token) |\n|---|---|---|---|---|---|---|---|")
    for row in rows:
        print(f"| {row['form']} | {row['seconds']} s | {row['tokens']} | {row['tokens_per_s']} | "
              f"{100 * row['ceiling_fraction']:.0f}% | {base / row['seconds']:.2f}x | {row['update_s']} s | "
              f"{row['gap_nats_per_token']} |")
    if args.out:
        args.out.write_text(json.dumps({"model": args.model, "threads": threads, "ceilings": ceilings,
                                        "matrix_parameters": params, "batch_size": args.batch_size,
                                        "max_new_tokens": args.max_new_tokens, "rows": rows}, indent=2) + "\n")


if __name__ == "__main__":
    main()
