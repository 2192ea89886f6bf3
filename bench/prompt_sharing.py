"""What forwarding a micro-batch's shared prompts once saves, on a run's own episodes (`trainer_svc.prompt_sharing`).

For each recorded step, the update's micro-batches as the trainer forms them (the episodes whose Eq 8 advantage is
not 0, planned by length; `prompt_gradient = false`) and the prompt positions their no-grad forward processes:
every row's prompt padded to the widest (before) against the common prefix once and each distinct prompt once
(now), with the tail (rows x longest response) beside them. No model needed for that table. With ``--time-steps``
it also times, on the policy, the prompt forward of those steps' micro-batches both ways, interleaved micro-batch by
micro-batch, and checks that the two caches hold the same keys and values.

    .venv/bin/python bench/prompt_sharing.py --run-dir ~/azr-runs/selfplay-cpu --steps 10-24 \
        --time-steps 21,23 --out bench/results/prompt_sharing.json
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402
from transformers import DynamicCache  # noqa: E402

from bench.prompt_gradient import policy, step_episodes  # noqa: E402
from services.algorithm.policy_objective import trr_advantages  # noqa: E402
from services.inference.causal_lm import hf_model  # noqa: E402
from services.settings import Settings  # noqa: E402
from trainer_svc.batching import MicroBatch, build_micro_batches  # noqa: E402
from trainer_svc.policy_forward import fill_prompt_cache  # noqa: E402
from trainer_svc.prompt_sharing import rows_prefix_share  # noqa: E402


def update_micro_batches(run_dir: Path, step: int, settings: Settings) -> list[MicroBatch]:
    """The micro-batches the update of ``step`` forwarded (entropy bonus 0: only the rows with signal)."""
    episodes = step_episodes(run_dir, step)
    advantages = trr_advantages(episodes, settings.trainer.trr_statistics)
    rows = [i for i, a in enumerate(advantages.tolist()) if a != 0.0]
    if not rows:
        return []
    return build_micro_batches(episodes, advantages, pad_id=0, micro_batch_size=settings.trainer.micro_batch_size,
                               micro_batch_tokens=settings.trainer.micro_batch_tokens, rows=rows)


def prompt_positions(mb: MicroBatch) -> tuple[int, int]:
    """(padded positions of the prompt forward before, positions with sharing) of one micro-batch."""
    lengths = mb.response_positions[:, 0]
    return mb.rows * int(lengths.max()), rows_prefix_share(mb.input_ids, lengths).positions


def padded_prompt_cache(backbone: torch.nn.Module, mb: MicroBatch, cache: DynamicCache) -> None:
    """The prompt forward before sharing: every row's prompt, right-padded to the widest, in one pass."""
    lengths = mb.response_positions[:, 0]
    width = int(lengths.max())
    mask = torch.arange(width).unsqueeze(0) < lengths.unsqueeze(1)
    backbone(input_ids=mb.input_ids[:, :width], attention_mask=mask.long(), cache=cache, use_cache=True)


def time_step(network: torch.nn.Module, micro_batches: list[MicroBatch]) -> dict[str, float]:
    """Seconds of the prompt forward of every micro-batch, before and with sharing, and the largest difference
    between the two caches' keys and values at the prompt positions each row reads."""
    causal = hf_model(network)
    backbone = causal.base_model
    seconds = {"padded_s": 0.0, "shared_s": 0.0}
    largest = 0.0
    for mb in micro_batches:
        caches = {}
        for name, fill in (("padded_s", lambda c, mb=mb: padded_prompt_cache(backbone, mb, c)),
                           ("shared_s", lambda c, mb=mb: fill_prompt_cache(backbone, mb.input_ids,
                                                                            mb.response_positions[:, 0], c))):
            cache = DynamicCache(config=causal.config)
            began = time.perf_counter()
            with torch.no_grad():
                fill(cache)
            seconds[name] += time.perf_counter() - began
            caches[name] = cache
        for row, length in enumerate(mb.response_positions[:, 0].tolist()):
            for before, now in zip(caches["padded_s"].layers, caches["shared_s"].layers, strict=True):
                for a, b in ((before.keys, now.keys), (before.values, now.values)):
                    largest = max(largest, float((a[row, :, :length] - b[row, :, :length]).abs().max()))
    return {**seconds, "max_abs_cache_difference": largest}


def parse_steps(text: str) -> list[int]:
    if "-" in text:
        first, last = text.split("-")
        return list(range(int(first), int(last) + 1))
    return [int(s) for s in text.split(",") if s]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--run-dir", type=Path, required=True)
    parser.add_argument("--steps", required=True, help="e.g. 10-24 or 21,23")
    parser.add_argument("--time-steps", default="", help="steps whose prompt forward is timed on the policy")
    parser.add_argument("--model", default="qwen-coder-1.5b")
    parser.add_argument("--adapters", type=Path, default=None, help="a snapshot (default: zero-initialised LoRA)")
    parser.add_argument("--micro-batch-size", type=int, default=2, help="the run's (selfplay-cpu: 2)")
    parser.add_argument("--micro-batch-tokens", type=int, default=4096, help="the run's (selfplay-cpu: 4,096)")
    parser.add_argument("--lora-rank", type=int, default=16, help="the run's (selfplay-cpu: 16)")
    parser.add_argument("--lora-alpha", type=float, default=32.0, help="the run's (selfplay-cpu: 32)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    run_dir = args.run_dir.expanduser()
    settings = Settings(micro_batch_size=args.micro_batch_size, micro_batch_tokens=args.micro_batch_tokens)
    rows, totals = [], {"before": 0, "now": 0, "tail": 0}
    batches: dict[int, list[MicroBatch]] = {}
    for step in parse_steps(args.steps):
        micro_batches = update_micro_batches(run_dir, step, settings)
        batches[step] = micro_batches
        before = now = 0
        for mb in micro_batches:
            padded, shared = prompt_positions(mb)
            before, now = before + padded, now + shared
        tail = sum(int(mb.response_positions.numel()) for mb in micro_batches)
        rows.append({"step": step, "micro_batches": len(micro_batches), "prompt_before": before,
                     "prompt_now": now, "tail": tail})
        totals = {"before": totals["before"] + before, "now": totals["now"] + now, "tail": totals["tail"] + tail}
        print(f"step {step:3d}: {len(micro_batches)} micro-batches, prompt positions {before:6,} -> {now:6,} "
              f"({1 - now / max(before, 1):.0%} fewer), tail {tail:5,}", flush=True)
    print(f"steps {args.steps}: prompt positions {totals['before']:,} -> {totals['now']:,} "
          f"({1 - totals['now'] / max(totals['before'], 1):.1%} fewer); tail {totals['tail']:,}")
    timed = []
    if args.time_steps:
        network = policy(args.model, args.adapters, Settings(lora_rank=args.lora_rank, lora_alpha=args.lora_alpha))
        for step in parse_steps(args.time_steps):
            micro_batches = batches.get(step) or update_micro_batches(run_dir, step, settings)
            result = {"step": step, **time_step(network, micro_batches)}
            timed.append(result)
            print(f"step {step:3d} on {args.model}: prompt forward {result['padded_s']:.1f} s -> "
                  f"{result['shared_s']:.1f} s ({result['padded_s'] / max(result['shared_s'], 1e-9):.2f}x); "
                  f"caches differ by at most {result['max_abs_cache_difference']:.2e}", flush=True)
    if args.out is not None:
        args.out.write_text(json.dumps({"run_dir": run_dir.name, "steps": rows, "totals": totals, "model": args.model,
                                        "adapters": str(args.adapters), "threads": args.threads, "timed": timed},
                                       indent=1) + "\n")


if __name__ == "__main__":
    main()
