"""Trainer throughput and memory: one TRR++ update against a plain training step, same model, same batch, same run.

Baseline: a plain causal-LM step — cross-entropy on the response tokens (`--plain-logits full`: [L, V] logits at every
position, as a standard fine-tuning loop computes them; `response`: only where the loss is, as TRR++ does), the same
autocast, backward, grad-norm clip, AdamW step — over the same micro-batches (same size, same length grouping). TRR++:
`PolicyTrainer.update` (advantages per group, PPO-clip token-mean loss, entropy bonus, the same accumulation, clip and
AdamW step). Both are timed alternately after a warm-up and reported as response tokens per second; overhead = baseline
tokens/s / TRR++ tokens/s − 1 (target ≤ 10%). On a GPU with a known bf16 peak each is also given as MFU
(bench/model_flops.py). Then peak memory per micro-batch size: each size runs in a fresh process (on CPU the peak RSS
cannot be reset), once for the TRR++ update and once for the baseline.

`--random-init` builds the model from its config.json with random weights instead of loading them: the FLOPs,
memory and kernels are those of the real model (speed does not depend on weight values), for machines the weights
cannot reach (a GPU box fed only a config and tokenizer).

    .venv/bin/python bench/trainer.py --model tiny [--per-group 4] [--prompt-len 256] [--response-len 128]
    .venv/bin/python bench/trainer.py --model smollm2 --micro-batch-sizes 1,2,4 --repeats 2
    python bench/trainer.py --model DIR_WITH_CONFIG --random-init --device cuda --per-group 16 --response-len 1024
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))

import torch  # noqa: E402

from bench.model_flops import mfu, peak_tflops, update_flops  # noqa: E402
from services.algorithm.task_types import TASK_GROUPS  # noqa: E402
from services.records import Episode  # noqa: E402
from services.settings import Settings  # noqa: E402
from trainer_svc.batching import MicroBatch  # noqa: E402
from trainer_svc.memory import peak_memory_mb, reset_peak_memory  # noqa: E402
from trainer_svc.policy_forward import autocast_for, resolve_device, response_logits  # noqa: E402
from trainer_svc.ppo_update import PolicyTrainer, make_optimizer  # noqa: E402
from trainer_svc.resume import load_model_and_tokenizer, pad_id_of  # noqa: E402

FULL_UPDATE = {"entropy_coef": 0.001, "skip_zero_advantage_batches": False}
"""Table 3's update, every episode through the model whatever its advantage: what the update benches time (the
embedded default skips a batch without signal and, at entropy 0, forwards only the episodes that carry it)."""


def make_episodes(vocab: int, per_group: int, prompt_len: int, response_len: int, seed: int = 0) -> list[Episode]:
    """6·per_group episodes with random token ids; lengths vary ±25% so padding and length grouping matter."""
    g = torch.Generator().manual_seed(seed)
    episodes = []
    for index, (task_type, role) in enumerate(TASK_GROUPS * per_group):
        p = int(prompt_len * (0.75 + 0.5 * torch.rand(1, generator=g)))
        r = max(1, int(response_len * (0.75 + 0.5 * torch.rand(1, generator=g))))
        episodes.append(Episode(
            id=f"bench-{index}", run_id="bench", step=0, task_type=task_type, role=role,
            prompt_ids=torch.randint(0, vocab, (p,), generator=g).tolist(),
            response_ids=torch.randint(0, vocab, (r,), generator=g).tolist(),
            behaviour_logprobs=(-2.0 - torch.rand(r, generator=g)).tolist(),
            reward=float(torch.randint(-2, 3, (1,), generator=g)) / 2, policy_version=0))
    return episodes


def plain_step(trainer: PolicyTrainer, optimizer: torch.optim.Optimizer, episodes: list[Episode],
               logits: str = "full") -> float:
    """The baseline: causal-LM cross-entropy on response tokens over the same micro-batches; returns seconds.

    ``logits="full"`` computes [L, V] logits at every position, as a standard fine-tuning loop does; ``"response"``
    only at the positions that predict response tokens (as the TRR++ update does), leaving the PPO terms as the
    only difference."""
    model, device = trainer.model, trainer.device
    micro_batches = trainer.micro_batches(episodes)
    total = sum(mb.response_tokens for mb in micro_batches)
    started = time.perf_counter()
    optimizer.zero_grad(set_to_none=True)
    for cpu_mb in micro_batches:
        mb = cpu_mb.to(device)
        with autocast_for(device, trainer.bf16):
            if logits == "response":
                picked = response_logits(model, mb).float()  # [b, R, V]
                targets = mb.response_ids.masked_fill(~mb.response_mask, -100)
            else:
                picked = model(input_ids=mb.input_ids, attention_mask=mb.attention_mask, use_cache=False).logits
                picked = picked.float()[:, :-1]
                targets = full_sequence_labels(mb, device)[:, 1:]
            loss = torch.nn.functional.cross_entropy(picked.reshape(-1, picked.shape[-1]), targets.reshape(-1),
                                                     ignore_index=-100, reduction="sum") / total
        loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return time.perf_counter() - started


def full_sequence_labels(mb: MicroBatch, device: torch.device) -> torch.Tensor:
    """[b, L] labels: each response token at its own position, -100 elsewhere (shifted by the caller)."""
    labels = torch.full_like(mb.input_ids, -100)
    rows = torch.arange(mb.rows, device=device).unsqueeze(1)
    target_pos = (mb.response_positions + 1).masked_fill(~mb.response_mask, 0)
    labels[rows.expand_as(target_pos)[mb.response_mask], target_pos[mb.response_mask]] = \
        mb.response_ids[mb.response_mask]
    return labels


def random_init_model(model_dir: Path, tokenizer_dir: Path | None = None) -> tuple[torch.nn.Module, object]:
    """The model of ``model_dir``'s config.json with seeded random float32 weights, and its tokenizer (from
    ``tokenizer_dir`` when given: shapes of one family share one, and a GPU lease carries 64 MiB)."""
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    torch.manual_seed(0)
    config = AutoConfig.from_pretrained(model_dir, local_files_only=True)
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    return model, AutoTokenizer.from_pretrained(tokenizer_dir or model_dir, local_files_only=True)


def load(args: argparse.Namespace, micro_batch_size: int) -> tuple[PolicyTrainer, list[Episode]]:
    from services.inference.model_registry import resolve_model
    from trainer_svc.activation_checkpointing import checkpoint_decoder_layers

    settings = Settings(device=args.device, micro_batch_size=micro_batch_size,
                        micro_batch_tokens=args.micro_batch_tokens,
                        gradient_checkpointing=args.gradient_checkpointing, trainer_bf16=args.bf16,
                        trainer_bf16_cpu=args.bf16, **FULL_UPDATE)
    model_dir = resolve_model(args.model)
    model, tokenizer = (random_init_model(model_dir, args.tokenizer) if args.random_init
                        else load_model_and_tokenizer(model_dir))
    if settings.trainer.gradient_checkpointing:
        checkpoint_decoder_layers(model)
    trainer = PolicyTrainer(model, settings.trainer, pad_id=pad_id_of(tokenizer), device=resolve_device(args.device))
    episodes = make_episodes(model.config.vocab_size, args.per_group, args.prompt_len, args.response_len)
    return trainer, episodes


def throughput(args: argparse.Namespace) -> dict[str, float]:
    """Alternate TRR++ updates and plain steps; median response tokens/s of each."""
    trainer, episodes = load(args, args.micro_batch_size)
    baseline_optimizer = make_optimizer(trainer.model, trainer.settings)
    tokens = sum(len(e.response_ids) for e in episodes)
    trr, plain = [], []
    trainer.update(episodes)  # warm-up (allocator, AdamW state, kernels)
    plain_step(trainer, baseline_optimizer, episodes, args.plain_logits)
    for repeat in range(args.repeats):
        trr.append(trainer.update(episodes).step_time_s)
        plain.append(plain_step(trainer, baseline_optimizer, episodes, args.plain_logits))
        print(f"  repeat {repeat}: TRR++ {trr[-1]:.2f} s, plain {plain[-1]:.2f} s", file=sys.stderr, flush=True)
    trr_s, plain_s = statistics.median(trr), statistics.median(plain)
    flops = update_flops(trainer.model, [(len(e.prompt_ids), len(e.response_ids)) for e in episodes])
    peak = peak_tflops(trainer.device, args.peak_tflops)
    return {"tokens": tokens, "trr_tokens_per_s": tokens / trr_s, "plain_tokens_per_s": tokens / plain_s,
            "overhead": trr_s / plain_s - 1.0, "all_tokens": sum(len(e.prompt_ids) + len(e.response_ids)
                                                                 for e in episodes),
            "trr_s": trr_s, "plain_s": plain_s, "flops": flops, "peak_tflops": peak,
            "trr_mfu": mfu(flops, trr_s, peak), "plain_mfu": mfu(flops, plain_s, peak)}


def peak_memory(args: argparse.Namespace) -> dict[str, float]:
    """One TRR++ update or one plain step (--mode) in this process; its peak memory."""
    trainer, episodes = load(args, args.micro_batch_size)
    reset_peak_memory(trainer.device)
    if args.mode == "trr":
        trainer.update(episodes)
    else:
        plain_step(trainer, make_optimizer(trainer.model, trainer.settings), episodes, args.plain_logits)
    memory, kind = peak_memory_mb(trainer.device)
    return {"peak_mb": memory, "kind": kind}


def child_peak(args: argparse.Namespace, micro_batch_size: int, mode: str) -> dict[str, float]:
    command = [sys.executable, __file__, "--child", "--mode", mode, "--micro-batch-size", str(micro_batch_size),
               "--model", args.model, "--device", args.device, "--per-group", str(args.per_group),
               "--prompt-len", str(args.prompt_len), "--response-len", str(args.response_len),
               "--threads", str(args.threads), "--micro-batch-tokens", str(args.micro_batch_tokens),
               "--gradient-checkpointing" if args.gradient_checkpointing else "--no-gradient-checkpointing",
               "--bf16" if args.bf16 else "--no-bf16", "--plain-logits", args.plain_logits]
    if args.random_init:
        command.append("--random-init")
    if args.tokenizer is not None:
        command += ["--tokenizer", str(args.tokenizer)]
    out = subprocess.run(command, capture_output=True, text=True)
    if out.returncode != 0:
        if "OutOfMemoryError" in out.stderr or out.returncode == -9:
            return {"peak_mb": float("nan"), "kind": "out of memory"}
        raise RuntimeError(f"memory child failed ({out.returncode}): {out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="tiny")
    parser.add_argument("--device", default="auto")
    parser.add_argument("--per-group", type=int, default=4, help="B: episodes per (task type x role) group")
    parser.add_argument("--prompt-len", type=int, default=256)
    parser.add_argument("--response-len", type=int, default=128)
    parser.add_argument("--micro-batch-size", type=int, default=4, help="for the throughput comparison")
    parser.add_argument("--micro-batch-sizes", default="1,2,4,8", help="for the memory table")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--micro-batch-tokens", type=int, default=Settings().trainer.micro_batch_tokens,
                        help="cap on padded tokens per micro-batch")
    parser.add_argument("--threads", type=int, default=2, help="torch intra-op threads (1 on a shared machine)")
    parser.add_argument("--random-init", action="store_true", help="config's architecture, random weights")
    parser.add_argument("--tokenizer", type=Path, default=None, help="with --random-init: the tokenizer's folder "
                        "(default: the model's)")
    parser.add_argument("--gradient-checkpointing", action=argparse.BooleanOptionalAction, default=False)
    parser.add_argument("--bf16", action=argparse.BooleanOptionalAction, default=True,
                        help="bf16 autocast on CUDA (ignored on CPU)")
    parser.add_argument("--plain-logits", choices=("full", "response"), default="full",
                        help="baseline's logits: every position (standard LM step) or response positions only")
    parser.add_argument("--peak-tflops", type=float, default=None, help="device peak for MFU (default: by name)")
    parser.add_argument("--only", choices=("throughput", "memory", "both"), default="both",
                        help="the throughput comparison, the memory table, or both (a time-limited GPU lease runs "
                             "them as separate calls so one finished part is kept)")
    parser.add_argument("--json-out", type=Path, default=None, help="also write the figures to this JSON file")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--mode", choices=("trr", "plain"), default="trr", help=argparse.SUPPRESS)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    sys.stdout.reconfigure(line_buffering=True)
    if args.child:
        print(json.dumps(peak_memory(args)))
        return
    sizes = [int(s) for s in args.micro_batch_sizes.split(",") if s] if args.only != "throughput" else []
    # children first: once this process has trained, its CUDA cache would crowd theirs out of the GPU
    peaks = {size: (child_peak(args, size, "trr"), child_peak(args, size, "plain")) for size in sizes}
    device = resolve_device(args.device)
    where = torch.cuda.get_device_name(device) if device.type == "cuda" else f"CPU, {args.threads} threads"
    setup = {"model": args.model, "random_init": args.random_init, "device": where, "torch": torch.__version__,
             "bf16": args.bf16 and device.type == "cuda", "gradient_checkpointing": args.gradient_checkpointing,
             "plain_logits": args.plain_logits, "episodes": 6 * args.per_group, "prompt_len": args.prompt_len,
             "response_len": args.response_len, "micro_batch_size": args.micro_batch_size}
    print(f"model {args.model}{' (random init)' if args.random_init else ''} on {where}, torch {torch.__version__}, "
          f"bf16 {setup['bf16']}, activation checkpointing {args.gradient_checkpointing}, "
          f"baseline logits: {args.plain_logits}")
    result: dict[str, float] = {}
    if args.only != "memory":
        result = throughput(args)
        print_throughput(args, result)
    if peaks:
        print("  peak memory per micro-batch size (fresh process each):")
        print("    micro-batch   TRR++ MiB   plain MiB   kind")
        for size, (trr, plain) in peaks.items():
            print(f"    {size:11d}   {trr['peak_mb']:9.0f}   {plain['peak_mb']:9.0f}   {trr['kind']} / {plain['kind']}")
    if args.json_out is not None:
        args.json_out.write_text(json.dumps({"setup": setup, "throughput": result,
                                             "peak_memory": {str(size): {"trr": trr, "plain": plain}
                                                             for size, (trr, plain) in peaks.items()}}, indent=1))


def print_throughput(args: argparse.Namespace, result: dict[str, float]) -> None:
    print(f"  {6 * args.per_group} episodes, {result['tokens']} response tokens ({result['all_tokens']} with prompts), "
          f"prompt ~{args.prompt_len}, response ~{args.response_len}, micro-batch {args.micro_batch_size}")
    for name, key in (("plain forward+backward+AdamW", "plain"), ("TRR++ PPO update            ", "trr")):
        share = result[f"{key}_mfu"]
        extra = f", MFU {100 * share:.1f}% of {result['peak_tflops']:.0f} TFLOP/s" if share is not None else ""
        print(f"  {name}: {result[f'{key}_tokens_per_s']:10.1f} response tokens/s, "
              f"{result['all_tokens'] / result[f'{key}_s']:10.1f} tokens/s{extra}")
    print(f"  overhead of TRR++ vs plain  : {100 * result['overhead']:+.1f}%  (target <= +10%)")


if __name__ == "__main__":
    main()
