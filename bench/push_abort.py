"""What a weight push costs the generation in flight, with and without resuming aborted samples.

Samples in flight on an `azr serve inference` server when the trainer pauses it (abort mode) come back aborted with
the tokens they had. Resumption off, the client asks for them again from their prompt and those tokens are thrown
away; resumption on (`sglang_resume_aborted`, the default), it re-posts prompt + those tokens and joins the pieces.

One generate call (`--prompts` x `--n` samples of up to `--max-new-tokens` tokens, in chunks of `--rows` samples,
`--concurrency` requests in flight) runs while a pusher pushes the same weights under new versions every
`--push-every` seconds; it runs once per setting (off, then on), after a baseline call without pushes, all against
one server in the same run; `--repeats` runs that sequence several times and reports the totals (timings on a
shared machine are noisy). Reported per setting: wall time (and the ratio to the baseline), pushes, samples aborted,
samples and generated tokens thrown away per push, tokens kept by resumption per push, the share of all generated
tokens thrown away, and the samples that span two weight versions.

    .venv/bin/python bench/push_abort.py [--model tiny] [--prompts 16] [--n 2] [--max-new-tokens 64] [--rows 4]
                                         [--push-every 1] [--repeats 1]
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))

from bench.served_model import ServedModel  # noqa: E402
from services.algorithm.prompts import deduction_solver_prompt  # noqa: E402
from services.inference.model_registry import resolve_model  # noqa: E402
from services.inference.sglang_client import AbortStats, SGLangClient  # noqa: E402
from services.ports import SamplingParams  # noqa: E402


@dataclass
class Run:
    """One generate call under pushes."""

    setting: str
    wall_s: float
    pushes: int
    tokens: int  # tokens in the returned samples
    stats: AbortStats


def total(setting: str, runs: list[Run]) -> Run:
    """The runs of one setting added up."""
    stats = AbortStats()
    for run in runs:
        for name in vars(stats):
            setattr(stats, name, getattr(stats, name) + getattr(run.stats, name))
    return Run(setting, sum(r.wall_s for r in runs), sum(r.pushes for r in runs), sum(r.tokens for r in runs), stats)


def generate(client: SGLangClient, prompts: list[list[int]], sampling: SamplingParams) -> tuple[float, int]:
    """(wall seconds, tokens in the returned samples) of one generate call."""
    started = time.perf_counter()
    out = client.generate(prompts, sampling)
    return time.perf_counter() - started, sum(len(c.output_ids) for group in out for c in group)


def pushed_call(client: SGLangClient, pusher: SGLangClient, model_dir: Path, prompts: list[list[int]],
                sampling: SamplingParams, push_every: float, first_version: int) -> tuple[float, int, int]:
    """(wall seconds, tokens returned, pushes made) of one generate call with a push every `push_every` seconds."""
    pushes, done = 0, threading.Event()

    def push_loop() -> None:
        nonlocal pushes
        while not done.wait(push_every):
            pusher.update_weights(str(model_dir), first_version + pushes)
            pushes += 1

    thread = threading.Thread(target=push_loop)
    thread.start()
    try:
        wall_s, tokens = generate(client, prompts, sampling)
    finally:
        done.set()
        thread.join()
    return wall_s, tokens, pushes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="tiny")
    parser.add_argument("--prompts", type=int, default=16)
    parser.add_argument("--n", type=int, default=2)
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument("--rows", type=int, default=4, help="samples per /generate request")
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--push-every", type=float, default=1.0)
    parser.add_argument("--repeats", type=int, default=1, help="baseline, off, on: this many times, totals shown")
    args = parser.parse_args()
    model_dir = resolve_model(args.model)
    sampling = SamplingParams(max_new_tokens=args.max_new_tokens, temperature=1.0, n=args.n, seed=0)
    runs: list[Run] = []
    with ServedModel(args.model) as server:
        pusher = SGLangClient([server.url], model_dir, timeout=600)
        baseline = SGLangClient([server.url], model_dir, timeout=600, max_rows_per_request=args.rows,
                                max_concurrent_requests=args.concurrency)
        prompts = [baseline.prompt_ids(deduction_solver_prompt("def f(x):\n    return x * 2", str(i)))
                   for i in range(args.prompts)]
        generate(baseline, prompts, sampling)  # warm-up: a process's first full-size call is several times slower
        quiet_s = quiet_tokens = 0.0
        version = 1
        for _ in range(args.repeats):
            wall_s, tokens = generate(baseline, prompts, sampling)
            quiet_s, quiet_tokens = quiet_s + wall_s, quiet_tokens + tokens
            for setting, resume in (("off", False), ("on", True)):
                client = SGLangClient([server.url], model_dir, timeout=600, retries=10, backoff_s=0.05,
                                      max_rows_per_request=args.rows, max_concurrent_requests=args.concurrency,
                                      resume_aborted=resume)
                wall_s, tokens, pushes = pushed_call(client, pusher, model_dir, prompts, sampling, args.push_every,
                                                     version)
                version += pushes
                runs.append(Run(setting, wall_s, pushes, tokens, client.abort_stats))
                client.close()
        baseline.close()
        pusher.update_weights(str(model_dir), 0)
        pusher.close()
    samples = args.prompts * args.n
    print(f"model {args.model}: {samples} samples of up to {args.max_new_tokens} tokens, {args.rows} per request, "
          f"{args.concurrency} requests in flight, a push every {args.push_every:g} s; {args.repeats} repeat(s), "
          "totals")
    print(f"baseline (no push): {quiet_s:.1f} s, {quiet_tokens:.0f} tokens")
    runs = [total(setting, [run for run in runs if run.setting == setting]) for setting in ("off", "on")]
    header = ("resume", "wall s", "x base", "pushes", "aborted/push", "lost samples/push", "lost tokens/push",
              "kept tokens/push", "lost share", "2-version samples")
    rows = []
    for run in runs:
        s, per_push = run.stats, max(run.pushes, 1)
        rows.append((run.setting, f"{run.wall_s:.1f}", f"{run.wall_s / quiet_s:.2f}", str(run.pushes),
                     f"{(s.samples + s.resumed) / per_push:.1f}", f"{s.lost / per_push:.1f}",
                     f"{s.tokens / per_push:.0f}", f"{s.resumed_tokens / per_push:.0f}",
                     f"{s.tokens / max(s.tokens + run.tokens, 1):.1%}", str(s.mixed_versions)))
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(header)]
    print("| " + " | ".join(h.ljust(w) for h, w in zip(header, widths)) + " |")
    print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    for row in rows:
        print("| " + " | ".join(c.ljust(w) for c, w in zip(row, widths)) + " |")
    print("aborted: every abort of a sample (a sample aborted twice counts twice); lost: samples started again with "
          "tokens thrown away; kept: tokens of aborted pieces that resumption continued from; lost share: thrown "
          "away / (thrown away + returned)")


if __name__ == "__main__":
    main()
