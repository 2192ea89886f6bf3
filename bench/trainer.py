"""Trainer throughput and memory: one TRR++ update against a plain training step, same model, same batch, same run.

Baseline: a plain causal-LM step — `model(input_ids, attention_mask, labels)` with the loss on the response tokens
only (full [L, V] logits, as a standard fine-tuning loop computes them), backward, grad-norm clip, AdamW step —
over the same micro-batches (same size, same length grouping). TRR++: `PolicyTrainer.update` (advantages per group,
PPO-clip token-mean loss, entropy bonus, the same accumulation, clip and AdamW step). Both are timed alternately after
a warm-up and reported as response tokens per second; overhead = baseline tokens/s / TRR++ tokens/s − 1
(target ≤ 10%). Then peak memory per micro-batch size: each size runs in a fresh process (on CPU the peak RSS
cannot be reset), once for the TRR++ update and once for the baseline.

    .venv/bin/python bench/trainer.py --model tiny [--per-group 4] [--prompt-len 256] [--response-len 128]
    .venv/bin/python bench/trainer.py --model smollm2 --micro-batch-sizes 1,2,4 --repeats 2
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

from services.algorithm.task_types import TASK_GROUPS  # noqa: E402
from services.records import Episode  # noqa: E402
from services.settings import Settings  # noqa: E402
from trainer_svc.memory import peak_memory_mb, reset_peak_memory  # noqa: E402
from trainer_svc.policy_forward import resolve_device  # noqa: E402
from trainer_svc.ppo_update import PolicyTrainer, make_optimizer  # noqa: E402
from trainer_svc.resume import load_model_and_tokenizer, pad_id_of  # noqa: E402


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


def plain_step(trainer: PolicyTrainer, optimizer: torch.optim.Optimizer, episodes: list[Episode]) -> float:
    """The baseline: causal-LM cross-entropy on response tokens over the same micro-batches; returns seconds."""
    model, device = trainer.model, trainer.device
    micro_batches = trainer.micro_batches(episodes)
    total = sum(mb.response_tokens for mb in micro_batches)
    started = time.perf_counter()
    optimizer.zero_grad(set_to_none=True)
    for cpu_mb in micro_batches:
        mb = cpu_mb.to(device)
        labels = torch.full_like(mb.input_ids, -100)
        rows = torch.arange(mb.rows, device=device).unsqueeze(1)
        target_pos = (mb.response_positions + 1).masked_fill(~mb.response_mask, 0)
        labels[rows.expand_as(target_pos)[mb.response_mask], target_pos[mb.response_mask]] = \
            mb.response_ids[mb.response_mask]
        logits = model(input_ids=mb.input_ids, attention_mask=mb.attention_mask, use_cache=False).logits.float()
        loss = torch.nn.functional.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]),
                                                 labels[:, 1:].reshape(-1), ignore_index=-100, reduction="sum") / total
        loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return time.perf_counter() - started


def load(args: argparse.Namespace, micro_batch_size: int) -> tuple[PolicyTrainer, list[Episode]]:
    from services.inference.model_registry import resolve_model

    settings = Settings(device=args.device, micro_batch_size=micro_batch_size)
    model, tokenizer = load_model_and_tokenizer(resolve_model(args.model))
    trainer = PolicyTrainer(model, settings, pad_id=pad_id_of(tokenizer), device=resolve_device(args.device))
    episodes = make_episodes(model.config.vocab_size, args.per_group, args.prompt_len, args.response_len)
    return trainer, episodes


def throughput(args: argparse.Namespace) -> dict[str, float]:
    """Alternate TRR++ updates and plain steps; median response tokens/s of each."""
    trainer, episodes = load(args, args.micro_batch_size)
    baseline_optimizer = make_optimizer(trainer.model, trainer.settings)
    tokens = sum(len(e.response_ids) for e in episodes)
    trr, plain = [], []
    trainer.update(episodes)  # warm-up (allocator, AdamW state, kernels)
    plain_step(trainer, baseline_optimizer, episodes)
    for repeat in range(args.repeats):
        trr.append(trainer.update(episodes).step_time_s)
        plain.append(plain_step(trainer, baseline_optimizer, episodes))
        print(f"  repeat {repeat}: TRR++ {trr[-1]:.2f} s, plain {plain[-1]:.2f} s", file=sys.stderr, flush=True)
    trr_tps, plain_tps = tokens / statistics.median(trr), tokens / statistics.median(plain)
    return {"tokens": tokens, "trr_tokens_per_s": trr_tps, "plain_tokens_per_s": plain_tps,
            "overhead": plain_tps / trr_tps - 1.0}


def peak_memory(args: argparse.Namespace) -> dict[str, float]:
    """One TRR++ update or one plain step (--mode) in this process; its peak memory."""
    trainer, episodes = load(args, args.micro_batch_size)
    reset_peak_memory(trainer.device)
    if args.mode == "trr":
        trainer.update(episodes)
    else:
        plain_step(trainer, make_optimizer(trainer.model, trainer.settings), episodes)
    memory, kind = peak_memory_mb(trainer.device)
    return {"peak_mb": memory, "kind": kind}


def child_peak(args: argparse.Namespace, micro_batch_size: int, mode: str) -> dict[str, float]:
    command = [sys.executable, __file__, "--child", "--mode", mode, "--micro-batch-size", str(micro_batch_size),
               "--model", args.model, "--device", args.device, "--per-group", str(args.per_group),
               "--prompt-len", str(args.prompt_len), "--response-len", str(args.response_len),
               "--threads", str(args.threads)]
    out = subprocess.run(command, capture_output=True, text=True, check=True)
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
    parser.add_argument("--threads", type=int, default=2, help="torch intra-op threads (1 on a shared machine)")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--mode", choices=("trr", "plain"), default="trr", help=argparse.SUPPRESS)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    sys.stdout.reconfigure(line_buffering=True)
    if args.child:
        print(json.dumps(peak_memory(args)))
        return
    result = throughput(args)
    print(f"model {args.model}: {6 * args.per_group} episodes, {result['tokens']} response tokens, "
          f"prompt ~{args.prompt_len}, response ~{args.response_len}, micro-batch {args.micro_batch_size}")
    print(f"  plain forward+backward+AdamW: {result['plain_tokens_per_s']:10.1f} tokens/s")
    print(f"  TRR++ PPO update            : {result['trr_tokens_per_s']:10.1f} tokens/s")
    print(f"  overhead of TRR++ vs plain  : {100 * result['overhead']:+.1f}%  (target <= +10%)")
    print("  peak memory per micro-batch size (fresh process each):")
    print("    micro-batch   TRR++ MiB   plain MiB   kind")
    for size in [int(s) for s in args.micro_batch_sizes.split(",") if s]:
        trr, plain = child_peak(args, size, "trr"), child_peak(args, size, "plain")
        print(f"    {size:11d}   {trr['peak_mb']:9.0f}   {plain['peak_mb']:9.0f}   {trr['kind']}")


if __name__ == "__main__":
    main()
