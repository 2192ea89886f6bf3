"""The PPO loss's log-probabilities and entropy over the vocabulary: chunked (trainer_svc/token_logprobs.py) against
the plain autograd expression it replaced, same shapes, same run.

One micro-batch of response positions: hidden states [b, R, H] → LM head → logits [b, R, V] → log π(token) and
entropy → a loss using both → backward into the head and the hidden states. Each variant runs in a fresh process
(the CPU peak RSS cannot be reset; on CUDA the allocator's peak is reset the same way), reporting the peak memory
above what the process held before the forward and the median time of forward + backward. Defaults are
qwen-coder-0.5b's head (H = 896, V = 151,936) and one embedded micro-batch (2 rows × 512 response tokens).

    .venv/bin/python bench/token_logprobs.py [--rows 2] [--response-len 512] [--device cpu] [--repeats 3]
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

from trainer_svc.token_logprobs import token_logprobs_and_entropy  # noqa: E402


def plain_expression(logits: torch.Tensor, ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The expression the trainer used before: float32 log-softmax, gathered; H = −Σ p log p."""
    logp_all = torch.log_softmax(logits.float(), dim=-1)
    return logp_all.gather(-1, ids.unsqueeze(-1)).squeeze(-1), -(logp_all.exp() * logp_all).sum(-1)


def chunked(logits: torch.Tensor, ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    logprobs, entropy = token_logprobs_and_entropy(logits, ids)
    assert entropy is not None
    return logprobs, entropy


VARIANTS = {"plain": plain_expression, "chunked": chunked}


def resident_mb() -> tuple[float, float]:
    """(current RSS, peak RSS) of this process in MiB, from /proc/self/status."""
    fields = dict(line.split(":", 1) for line in Path("/proc/self/status").read_text().splitlines() if ":" in line)
    return int(fields["VmRSS"].split()[0]) / 1024, int(fields["VmHWM"].split()[0]) / 1024


def one_variant(args: argparse.Namespace) -> dict[str, float]:
    """Time and peak memory of `args.variant` in this (fresh) process."""
    device = torch.device(args.device)
    torch.manual_seed(0)
    head = torch.nn.Linear(args.hidden, args.vocab, bias=False, device=device)
    hidden = torch.randn(args.rows, args.response_len, args.hidden, device=device, requires_grad=True)
    ids = torch.randint(0, args.vocab, (args.rows, args.response_len), device=device)
    weights = torch.randn(args.rows, args.response_len, device=device)
    fn = VARIANTS[args.variant]

    def step() -> float:
        started = time.perf_counter()
        logprobs, entropy = fn(head(hidden), ids)
        ((weights * logprobs).sum() + 1e-3 * entropy.sum()).backward()
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        head.weight.grad = hidden.grad = None
        return time.perf_counter() - started

    step()  # warm-up (allocator, kernels)
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
        before = torch.cuda.memory_allocated(device) / 2**20
    else:
        before, _ = resident_mb()
    times = [step() for _ in range(args.repeats)]
    peak = (torch.cuda.max_memory_allocated(device) / 2**20 if device.type == "cuda" else resident_mb()[1])
    return {"seconds": statistics.median(times), "extra_mb": peak - before}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=2)
    parser.add_argument("--response-len", type=int, default=512)
    parser.add_argument("--hidden", type=int, default=896)
    parser.add_argument("--vocab", type=int, default=151_936)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--variant", choices=sorted(VARIANTS), help=argparse.SUPPRESS)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    if args.variant:
        print(json.dumps(one_variant(args)))
        return
    results = {}
    for variant in ("plain", "chunked"):
        command = [sys.executable, __file__, "--variant", variant] + sys.argv[1:]
        out = subprocess.run(command, capture_output=True, text=True, check=True)
        results[variant] = json.loads(out.stdout.strip().splitlines()[-1])
    plain, new = results["plain"], results["chunked"]
    print(f"log-probs + entropy of {args.rows} x {args.response_len} positions over V = {args.vocab} "
          f"(head H = {args.hidden}) on {args.device}, forward + backward:")
    print(f"  plain autograd expression: {plain['seconds'] * 1e3:8.1f} ms, peak +{plain['extra_mb']:7.0f} MiB")
    print(f"  chunked, own backward    : {new['seconds'] * 1e3:8.1f} ms, peak +{new['extra_mb']:7.0f} MiB")
    print(f"  ratio chunked / plain    : time {new['seconds'] / plain['seconds']:.2f}x, "
          f"memory {new['extra_mb'] / max(plain['extra_mb'], 1e-9):.2f}x")


if __name__ == "__main__":
    main()
