"""Prefill and decoding rates of the llama.cpp engine's kernels per base form, with a LoRA adapter applied as in a
LoRA run, against this machine's int8 GEMM ceiling measured in the same run.

    .venv/bin/python bench/llama_cpp_rates.py [--model qwen-coder-1.5b] [--forms release q8_0 q4_0]
        [--prompt-tokens 768] [--rows 1 6 24] [--steps 8] [--out FILE]

A real proposer prompt of step 0 (K = 6 seed references; bench/step_generation.py's `step_prompts`), cut to
`--prompt-tokens`, is prefilled in one sequence and copied to `rows` sequences that then decode `--steps` tokens
together. Per form: prefill tokens/s, decoding ms per step and tokens/s per row count, and the model's multiply-adds
per second (2 x matrix parameters per position) as a fraction of the int8 ceiling; ratios against the first form.
The adapter is random (r = 16 on every projection, as the presets): what it costs is its shape, not its values.
Requantized forms are made once beside the release (the engine's own cache) before any timing.
"""

from __future__ import annotations

import argparse
import json
import platform
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))

import numpy as np  # noqa: E402
import torch  # noqa: E402

from bench.engine_compare import gemm_ceilings, model_parameters  # noqa: E402
from bench.step_generation import step_prompts  # noqa: E402
from services.inference.chat_codec import PromptCodec  # noqa: E402
from services.inference.engine_choice import gguf_for  # noqa: E402
from services.inference.gguf_export import PEFT_PREFIX, gguf_architecture, write_lora_gguf  # noqa: E402
from services.inference.llama_cpp_engine import served_base  # noqa: E402
from services.inference.llama_cpp_runtime import LlamaContext, LlamaModel, Token  # noqa: E402
from services.inference.model_registry import resolve_model  # noqa: E402

PROJECTIONS = {"self_attn": ("q_proj", "k_proj", "v_proj", "o_proj"), "mlp": ("gate_proj", "up_proj", "down_proj")}


def random_adapter(model_dir: Path, target: Path, rank: int = 16) -> Path:
    """A PEFT LoRA directory of rank `rank` on every projection of the model, random A and small random B."""
    from safetensors.numpy import save_file

    config = json.loads((model_dir / "config.json").read_text())
    hidden, inter = config["hidden_size"], config["intermediate_size"]
    heads, kv = config["num_attention_heads"], config.get("num_key_value_heads") or config["num_attention_heads"]
    head_dim = config.get("head_dim") or hidden // heads
    shapes = {"q_proj": (hidden, heads * head_dim), "k_proj": (hidden, kv * head_dim),
              "v_proj": (hidden, kv * head_dim), "o_proj": (heads * head_dim, hidden),
              "gate_proj": (hidden, inter), "up_proj": (hidden, inter), "down_proj": (inter, hidden)}
    rng = np.random.default_rng(0)
    state = {}
    for layer in range(config["num_hidden_layers"]):
        for block, names in PROJECTIONS.items():
            for name in names:
                fan_in, fan_out = shapes[name]
                prefix = f"{PEFT_PREFIX}model.layers.{layer}.{block}.{name}"
                state[f"{prefix}.lora_A.weight"] = rng.standard_normal((rank, fan_in), dtype=np.float32) * 0.01
                state[f"{prefix}.lora_B.weight"] = rng.standard_normal((fan_out, rank), dtype=np.float32) * 1e-3
    target.mkdir(parents=True, exist_ok=True)
    save_file(state, str(target / "adapter_model.safetensors"))
    (target / "adapter_config.json").write_text(json.dumps({"peft_type": "LORA", "r": rank, "lora_alpha": 2.0 * rank,
                                                            "target_modules": sorted(shapes)}))
    return target


def form_rates(gguf: Path, adapter: Path, prompt: list[int], rows: list[int], steps: int, threads: int
               ) -> dict[str, Any]:
    """Prefill tokens/s of `prompt`, then per row count the seconds per decoding step of that many rows."""
    model = LlamaModel(gguf)
    lora = model.load_adapter(adapter)
    most = max(rows)
    context = LlamaContext(model, sequences=most, cells_per_sequence=len(prompt) + steps + 1,
                           batch_tokens=512, threads=threads)
    context.set_adapter(lora)
    try:
        tokens = [Token(prompt[p], p, 0, p == len(prompt) - 1) for p in range(len(prompt))]
        started = time.perf_counter()
        for start in range(0, len(tokens), context.batch_tokens):
            context.decode(tokens[start:start + context.batch_tokens])
        prefill_s = time.perf_counter() - started
        decode: dict[str, float] = {}
        for count in rows:
            for sequence in range(1, count):
                context.copy_sequence(0, sequence)
            context.decode([Token(prompt[-1], len(prompt), s, True) for s in range(count)])  # warm: the copies land
            started = time.perf_counter()
            for step in range(1, steps + 1):
                context.decode([Token(prompt[-1], len(prompt) + step, s, True) for s in range(count)])
            decode[str(count)] = (time.perf_counter() - started) / steps
            for sequence in range(1, count):
                context.drop_sequence(sequence)
            context.copy_sequence(0, 0, len(prompt))  # a copy onto itself is none: this cuts row 0 back to the prompt
        return {"prefill_tokens_per_s": len(prompt) / prefill_s, "decode_s_per_step": decode}
    finally:
        context.close()
        model.free_adapter(lora)
        model.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="qwen-coder-1.5b")
    parser.add_argument("--forms", nargs="+", default=["release", "q8_0", "q4_0"])
    parser.add_argument("--prompt-tokens", type=int, default=768)
    parser.add_argument("--rows", nargs="+", type=int, default=[1, 6, 24])
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()

    threads = torch.get_num_threads()
    model_dir = resolve_model(args.model)
    release = gguf_for(model_dir)
    if release is None:
        raise SystemExit(f"{args.model} has no GGUF of its own")
    params = model_parameters(model_dir)
    codec = PromptCodec.from_model_dir(model_dir)
    proposers, _ = step_prompts(codec, 1, random.Random(0))
    prompt = proposers[0][:args.prompt_tokens]
    work = Path(tempfile.mkdtemp(prefix="llama-cpp-rates-"))
    architecture, blocks = gguf_architecture(release)
    adapter = write_lora_gguf(random_adapter(model_dir, work / "adapter"), work / "adapter.gguf",
                              architecture=architecture, blocks=blocks,
                              model_config=json.loads((model_dir / "config.json").read_text()))
    bases = {form: served_base(release, form, release.parent, threads) for form in args.forms}  # made before timing
    ceiling = gemm_ceilings(threads)["int8"]
    print(f"{args.model}: {params / 1e9:.2f} G matrix parameters; {platform.processor() or platform.machine()}, "
          f"{threads} threads; int8 ceiling {ceiling} GOP/s; prompt {len(prompt)} tokens; LoRA r = 16", flush=True)
    results = []
    for form, gguf in bases.items():
        rates = form_rates(gguf, adapter, prompt, args.rows, args.steps, threads)
        results.append({"form": form, **rates})
        print(json.dumps(results[-1]), flush=True)
    ceiling = max(ceiling, gemm_ceilings(threads)["int8"])  # the better of the start's and the end's
    first = results[0]
    header = " | ".join(f"decode {r} row(s): ms/step, tok/s" for r in args.rows)
    print(f"\n| base ({args.model}, LoRA r = 16) | prefill tok/s | of the int8 ceiling | {header} | vs {first['form']} "
          f"(prefill / decode {max(args.rows)} rows) |\n|" + "---|" * (4 + len(args.rows)))
    for row in results:
        prefill = row["prefill_tokens_per_s"]
        cells = " | ".join(f"{1000 * row['decode_s_per_step'][str(r)]:.0f}, {r / row['decode_s_per_step'][str(r)]:.1f}"
                           for r in args.rows)
        fraction = 2 * params * prefill / 1e9 / ceiling
        most = str(max(args.rows))
        print(f"| {row['form']} | {prefill:.1f} | {100 * fraction:.0f}% | {cells} | "
              f"{prefill / first['prefill_tokens_per_s']:.2f}x / "
              f"{first['decode_s_per_step'][most] / row['decode_s_per_step'][most]:.2f}x |")
    if args.out:
        args.out.write_text(json.dumps({"model": args.model, "threads": threads, "int8_ceiling": ceiling,
                                        "matrix_parameters": params, "prompt_tokens": len(prompt),
                                        "steps": args.steps, "results": results}, indent=2) + "\n")


if __name__ == "__main__":
    main()
