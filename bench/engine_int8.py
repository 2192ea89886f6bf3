"""A decoding step of the local engine, float32 against int8 Linear layers (`local_engine_int8`), in one run.

    .venv/bin/python bench/engine_int8.py [--model qwen-coder-0.5b] [--rows 12] [--prompt-tokens 200] [--steps 8]
                                          [--repeats 2] [--out bench/results/engine_int8.json]
                                          [--keep-float down_proj]   # a third model: int8 but those layers
                                          [--per-channel]  # (a third model:) per-channel weight scales

Both models are built in this process from the same weights (the int8 one by `quantize_linear_int8`, what the
engine does). Each repeat prefills the same `rows` prompts (CRUXEval programs, cut to `prompt-tokens`) in each model
and times `steps` greedy decoding steps of all rows together; it prints seconds per decoding step, the ratio, and
how far the int8 model's next-token distribution is from the float32 one's at the last prompt position (KL in nats,
mean over rows; the largest change of the float32 argmax token's log-probability).
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))

import torch  # noqa: E402

from services.inference.decoding import cache_keyword  # noqa: E402
from services.inference.local_engine import load_causal_lm, quantize_linear_int8  # noqa: E402
from services.inference.model_registry import resolve_model  # noqa: E402

CRUXEVAL = Path(os.environ.get("AZR_SHARED_DIR", REPO_ROOT.parent / "shared")) / "data" / "cruxeval.jsonl"


@torch.inference_mode()
def decode_seconds(model: torch.nn.Module, ids: torch.Tensor, steps: int) -> tuple[float, torch.Tensor]:
    """(seconds per decoding step of every row, log-probs of the next token after the prompt [rows, V])."""
    keyword = cache_keyword(model)
    out = model(input_ids=ids, use_cache=True)
    cache, logits = out[keyword], out.logits[:, -1].float()
    first = torch.log_softmax(logits, dim=-1)
    token = logits.argmax(-1, keepdim=True)
    started = time.perf_counter()
    for _ in range(steps):
        out = model(input_ids=token, use_cache=True, **{keyword: cache})
        cache, token = out[keyword], out.logits[:, -1].argmax(-1, keepdim=True)
    return (time.perf_counter() - started) / steps, first


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="qwen-coder-0.5b")
    parser.add_argument("--rows", type=int, default=12)
    parser.add_argument("--prompt-tokens", type=int, default=200)
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--data", type=Path, default=CRUXEVAL)
    parser.add_argument("--out", type=Path)
    parser.add_argument("--keep-float", nargs="*", default=[], metavar="NAME",
                        help="also time int8 with the Linear layers whose names end in NAME kept float32")
    parser.add_argument("--per-channel", action="store_true",
                        help="that variant (or, without --keep-float, a variant) with per-channel weight scales")
    args = parser.parse_args()

    from transformers import AutoTokenizer

    model_dir = resolve_model(args.model)
    float32 = load_causal_lm(model_dir, torch.device("cpu"), torch.float32)
    int8 = quantize_linear_int8(copy.deepcopy(float32))
    variant = (["per channel"] if args.per_channel else []) + (
        [f"{'/'.join(args.keep_float)} float32"] if args.keep_float else [])
    partial = (quantize_linear_int8(copy.deepcopy(float32), args.keep_float, per_channel=args.per_channel)
               if variant else None)
    tokenizer = AutoTokenizer.from_pretrained(str(model_dir), local_files_only=True)
    rows = [json.loads(line) for line in args.data.read_text().splitlines()[:args.rows]]
    ids = torch.tensor([(tokenizer(row["code"] * 6)["input_ids"] * 8)[:args.prompt_tokens] for row in rows])
    print(f"{args.model}, {torch.get_num_threads()} threads; {args.rows} rows, {args.prompt_tokens}-token prompts, "
          f"{args.steps} decoding steps per measurement")
    runs: list[dict[str, Any]] = []
    for repeat in range(args.repeats):
        seconds_fp32, logp_fp32 = decode_seconds(float32, ids, args.steps)
        seconds_int8, logp_int8 = decode_seconds(int8, ids, args.steps)
        kl = float((logp_fp32.exp() * (logp_fp32 - logp_int8)).sum(-1).mean())
        top = logp_fp32.argmax(-1, keepdim=True)
        top_change = float((logp_fp32.gather(-1, top) - logp_int8.gather(-1, top)).abs().max())
        runs.append({"float32_s_per_step": round(seconds_fp32, 3), "int8_s_per_step": round(seconds_int8, 3),
                     "speedup": round(seconds_fp32 / seconds_int8, 2), "kl_nats": round(kl, 5),
                     "max_top_logprob_change": round(top_change, 5)})
        print(f"repeat {repeat + 1}: float32 {seconds_fp32:.3f} s/step, int8 Linear {seconds_int8:.3f} s/step: "
              f"{seconds_fp32 / seconds_int8:.2f}x; KL {kl:.4f} nats, top token's log p changed <= {top_change:.4f}")
        if partial is not None:
            seconds_partial, logp_partial = decode_seconds(partial, ids, args.steps)
            kl_partial = float((logp_fp32.exp() * (logp_fp32 - logp_partial)).sum(-1).mean())
            runs[-1] |= {"kept_float": list(args.keep_float), "per_channel": args.per_channel,
                         "partial_s_per_step": round(seconds_partial, 3),
                         "partial_speedup": round(seconds_fp32 / seconds_partial, 2),
                         "partial_kl_nats": round(kl_partial, 5)}
            print(f"          int8, {', '.join(variant)}: {seconds_partial:.3f} s/step: "
                  f"{seconds_fp32 / seconds_partial:.2f}x; KL {kl_partial:.4f} nats")
    median = statistics.median(run["speedup"] for run in runs)
    print(f"median speedup of a decoding step: {median:.2f}x")
    if args.out:
        args.out.write_text(json.dumps({"model": args.model, "threads": torch.get_num_threads(), "rows": args.rows,
                                        "prompt_tokens": args.prompt_tokens, "steps": args.steps, "runs": runs,
                                        "median_speedup": median}, indent=2) + "\n")


if __name__ == "__main__":
    main()
