"""What the embedded run's CPU defaults buy: torch threads and bf16, for generation and for the update.

    .venv/bin/python bench/cpu_speedups.py [--model qwen-coder-0.5b] [--rows 1,6] [--new-tokens 40] [--repeats 2]

Generation (the local engine, one deduction proposer prompt with K = 6 references, `rows` copies): prefill seconds
and decoding ms per step, float32 vs bfloat16 weights (`local_engine_dtype`), 2 threads. The update (`PolicyTrainer`,
six random-token episodes of ~`prompt-len` + ~`response-len` tokens, activation checkpointing as the embedded profile
runs it): seconds per update with 1 thread in float32 (the baseline), 2 threads in float32 (`AZR_TORCH_THREADS=0`
while no sandbox job runs), 2 threads under bf16 autocast (`trainer_bf16_cpu`), each the median of `repeats`
updates after a warm-up. Ratios are speedups against the float32 figure measured in the same run. bf16 only helps
where the CPU multiplies it natively (AVX512-BF16/AMX); the script says which this machine has.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))

import torch  # noqa: E402

from bench.inference import _proposer_prompt_ids  # noqa: E402
from bench.trainer import FULL_UPDATE, make_episodes  # noqa: E402
from services.compute.cpu_features import cpu_has_native_bf16  # noqa: E402
from services.compute.torch_threads import available_cores  # noqa: E402
from services.inference.model_registry import resolve_model  # noqa: E402
from services.ports import SamplingParams  # noqa: E402
from services.settings import Settings  # noqa: E402


def generation(model_dir: Path, dtype: torch.dtype, rows: int, new_tokens: int) -> tuple[float, float]:
    """(prefill s, decoding ms per step) of `rows` copies of the proposer prompt."""
    from services.inference.local_engine import LocalEngine

    engine = LocalEngine(model_dir, device="cpu", dtype=dtype)
    prompt = _proposer_prompt_ids(engine)
    stamps: list[float] = []
    engine.on_decode_step = lambda progress: stamps.append(time.perf_counter()) if progress.step > 0 else None
    started = time.perf_counter()
    engine.generate([prompt] * rows, SamplingParams(max_new_tokens=new_tokens, temperature=1.0, stop=[]))
    steps = stamps[1:]  # the first step's logits come with the prefill
    return stamps[0] - started, 1000 * (steps[-1] - steps[0]) / (len(steps) - 1)


def updates(model_dir: Path, configs: list[tuple[int, bool]], repeats: int, prompt_len: int,
            response_len: int, lora_rank: int = 0) -> dict[tuple[int, bool], float]:
    """Median seconds per update for each (threads, bf16 autocast), on one model and one batch; `lora_rank` > 0
    trains LoRA adapters of that rank (alpha 2·rank, every linear layer of the decoder) instead of every weight."""
    from trainer_svc.resume import fresh_trainer

    lora = {"lora_rank": lora_rank, "lora_alpha": 2.0 * lora_rank} if lora_rank else {}
    settings = Settings(device="cpu", micro_batch_size=2, micro_batch_tokens=4096, gradient_checkpointing=True,
                        trainer_bf16_cpu=False, **FULL_UPDATE, **lora)
    trainer = fresh_trainer(model_dir, settings.trainer).trainer
    episodes = make_episodes(trainer.model.config.vocab_size, 1, prompt_len, response_len)
    torch.set_num_threads(2)
    trainer.update(episodes)  # warm-up: AdamW state, allocator
    times: dict[tuple[int, bool], list[float]] = {config: [] for config in configs}
    for _ in range(repeats):
        for threads, bf16 in configs:  # interleaved, so drift on a shared machine hits every configuration
            torch.set_num_threads(threads)
            trainer.bf16 = bf16
            started = time.perf_counter()
            trainer.update(episodes)
            times[(threads, bf16)].append(time.perf_counter() - started)
            print(f"  update, {threads} thread(s), bf16 {bf16}: {times[(threads, bf16)][-1]:.1f} s", file=sys.stderr,
                  flush=True)
    return {config: statistics.median(values) for config, values in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="qwen-coder-0.5b")
    parser.add_argument("--rows", default="1,6", help="comma-separated batch sizes for generation")
    parser.add_argument("--new-tokens", type=int, default=40)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--prompt-len", type=int, default=500, help="update episodes: mean prompt tokens")
    parser.add_argument("--response-len", type=int, default=250, help="update episodes: mean response tokens")
    parser.add_argument("--lora-rank", type=int, default=0, help="update: LoRA adapters of this rank (0: full)")
    parser.add_argument("--skip-generation", action="store_true", help="measure the update only")
    args = parser.parse_args()
    model_dir = Path(resolve_model(args.model))
    print(f"{args.model}; CPU with native bf16: {cpu_has_native_bf16()}; {available_cores()} cores")
    torch.set_num_threads(2)
    if not args.skip_generation:
        print("| generation, 2 threads | rows | float32 | bfloat16 | speedup |")
        print("|---|---|---|---|---|")
    for rows in [] if args.skip_generation else [int(r) for r in args.rows.split(",")]:
        fp32 = generation(model_dir, torch.float32, rows, args.new_tokens)
        bf16 = generation(model_dir, torch.bfloat16, rows, args.new_tokens)
        print(f"| prefill | {rows} | {fp32[0]:.1f} s | {bf16[0]:.1f} s | {fp32[0] / bf16[0]:.2f}x |", flush=True)
        print(f"| decoding step | {rows} | {fp32[1]:.0f} ms | {bf16[1]:.0f} ms | {fp32[1] / bf16[1]:.2f}x |",
              flush=True)
    configs = [(1, False), (2, False), (2, True)]
    seconds = updates(model_dir, configs, args.repeats, args.prompt_len, args.response_len, args.lora_rank)
    base = seconds[(1, False)]
    kind = f"LoRA r = {args.lora_rank}" if args.lora_rank else "full fine-tuning"
    print(f"| update, {kind} (6 episodes, ~{6 * (args.prompt_len + args.response_len):,} tokens) | seconds | "
          f"vs 1 thread float32 |")
    print("|---|---|---|")
    for threads, bf16 in configs:
        label = f"{threads} thread(s), {'bf16 autocast' if bf16 else 'float32'}"
        print(f"| {label} | {seconds[(threads, bf16)]:.1f} | {base / seconds[(threads, bf16)]:.2f}x |")


if __name__ == "__main__":
    main()
