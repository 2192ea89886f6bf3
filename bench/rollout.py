"""Where a self-play step's wall time goes: generation / executor / store+queue / training / other.

Target: everything that is neither generation nor training stays under 10% of the step. The split comes from the
`time/<phase>` keys of each step's metrics line (services/coordinator/step_metrics.py PhaseTimer); the script also
times every step from the outside (the loop's progress lines), so work the loop does around the step timer is a
column of its own and the columns of a row sum to the step's wall time.

    .venv/bin/python bench/rollout.py embedded [--model tiny|smollm2|qwen-coder-0.5b|PATH] [--steps 3]
        [--batch-size 2] [--max-response-tokens 128] [--then-smollm2]
    .venv/bin/python bench/rollout.py distributed [--model tiny] [--steps 2] [--batch-size 2]

`embedded`: `azr run`'s own building blocks (azr/factory/embedded.py open_embedded_run) in this process, in a
temporary run directory, buffers seeded from the authors' seed files (no model-seeding rounds). Training is in the
step (`time/training`): after each step the in-process trainer updates, checkpoints and pushes the weights.

`distributed`: every service a real process on loopback (bench/rollout_stack.py): PostgreSQL (a private database,
dropped afterwards), Redis (a private run id and RQ queue, keys deleted afterwards), RQ executor workers, `azr serve
inference`, both APIs, `azr trainer`, `azr coordinator`. Training runs in the trainer process and overlaps the
coordinator's next step (max staleness 1), so the coordinator's split has no training column; the trainer's own
table gives its update time and what surrounds it (batch in the stream → new version published).

The tiny model writes random text: no proposal is valid and no answer parses, so executor and store work hardly
happen. `--then-smollm2` (embedded) also runs SmolLM2-135M (when its package is installed), whose proportions look
more like a real model's. The load average is printed next to every table: on a shared machine the ratios move with it.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))
SEEDS_DIR = Path(os.environ.get("AZR_SHARED_DIR", REPO_ROOT.parent / "shared")) / "data" / "azr_seeds"

from bench.rollout_table import (  # noqa: E402
    OVERHEAD_TARGET,
    ProgressClock,
    StepSplit,
    mean_split,
    split_table,
    splits_from_run,
    trainer_table,
)

EMBEDDED_PHASES = ("generation", "executor", "store_queue", "training", "other", "outside")
COORDINATOR_PHASES = ("generation", "executor", "store_queue", "other", "outside")


def load_note() -> str:
    """The 1/5/15-minute load average and the core count: what the figures were measured under."""
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.2f} / {five:.2f} / {fifteen:.2f} on {os.cpu_count()} cores"


def model_unavailable(name: str) -> str | None:
    """Why `name` cannot be resolved offline (a missing package), or None when it can."""
    from services.inference.model_registry import RELEASES, ModelUnavailable, payload_files

    if name not in RELEASES:
        return None if name == "tiny" or (Path(name) / "config.json").is_file() else f"no model {name!r}"
    try:
        payload_files(RELEASES[name])
    except ModelUnavailable as error:
        return str(error)
    return None


def seed_files(rows: int, into: Path) -> list[Path]:
    """The authors' seed files; with `rows` > 0, copies holding only their first `rows` rows (a quicker import)."""
    files = sorted(SEEDS_DIR.glob("*.jsonl"))
    if not files:
        raise SystemExit(f"no seed files in {SEEDS_DIR} (set AZR_SHARED_DIR)")
    if rows <= 0:
        return files
    into.mkdir(parents=True, exist_ok=True)
    copies = []
    for path in files:
        copy = into / path.name
        copy.write_text("".join(path.read_text().splitlines(keepends=True)[:rows]))
        copies.append(copy)
    return copies


def run_embedded(args: argparse.Namespace, model: str, root: Path) -> tuple[list[StepSplit], dict[str, float]]:
    """`args.steps` steps of the embedded profile in this process; the step splits and the set-up times."""
    import torch

    from azr.factory.embedded import open_embedded_run
    from services.settings import Settings

    if args.torch_threads:
        torch.set_num_threads(args.torch_threads)

    run_root = root / f"runs-{Path(model).name}"
    settings = Settings(
        profile="embedded", run_id="bench", run_root=run_root, model=model, steps=args.steps,
        batch_size=args.batch_size, max_response_tokens=args.max_response_tokens,
        learnability_samples=args.learnability_samples, executor_workers=args.executor_workers,
        micro_batch_size=args.micro_batch_size,
        seed_max_rounds=0, seed_files=seed_files(args.seed_rows, root / "seeds"),
        run_api_port=0, tensorboard=False, wandb=False,  # the steps alone: no run API, no metric sinks
        database_url=f"sqlite:///{(run_root / 'bench' / 'buffers.sqlite3').resolve()}")
    settings.save_resolved()  # as `azr run` does; it also creates the run directory the SQLite file lives in
    clock = ProgressClock()

    def progress(message: str) -> None:
        clock.observe(time.perf_counter(), message)
        if args.verbose:
            print(message, file=sys.stderr, flush=True)

    began = time.perf_counter()
    embedded = open_embedded_run(settings, progress)
    loaded = time.perf_counter()
    try:
        lines = embedded.run()
    finally:
        embedded.close()
    seeding_s = clock.starts.get(1, loaded) - loaded
    timed = sum(clock.wall(int(line["step"])) is not None for line in lines)
    return splits_from_run(lines, clock), {"load_s": loaded - began, "seeding_s": seeding_s, "timed": timed}


def print_embedded(args: argparse.Namespace, model: str, root: Path) -> StepSplit:
    """Run the embedded mode for one model and print its table; returns the mean step."""
    before = load_note()
    splits, setup = run_embedded(args, model, root)
    import torch

    print(f"\n### embedded, model {model}: B = {args.batch_size}, n = {args.learnability_samples}, "
          f"max response tokens {args.max_response_tokens}, micro-batch {args.micro_batch_size}, "
          f"{args.executor_workers} sandbox workers, "
          f"{torch.get_num_threads()} torch threads, {len(splits)} step(s)\n")
    print(f"machine: {before} (before), {load_note()} (after); set-up not in the table: engine + trainer "
          f"{setup['load_s']:.1f} s, seed import {setup['seeding_s']:.1f} s; steps timed from the loop's progress "
          f"lines: {setup['timed']} of {len(splits)}\n")
    print(split_table(splits, EMBEDDED_PHASES))
    return mean_split(splits)


def embedded(args: argparse.Namespace) -> None:
    """The embedded mode (and smollm2 after tiny when asked)."""
    reason = model_unavailable(args.model)
    if reason:
        raise SystemExit(f"model {args.model} unavailable: {reason}")
    root = Path(tempfile.mkdtemp(prefix="azr-bench-rollout-"))
    try:
        mean = print_embedded(args, args.model, root)
        if args.model != "tiny":
            return
        smollm2_missing = model_unavailable("smollm2")
        verdict = "misses" if mean.overhead >= OVERHEAD_TARGET else "meets"
        print(f"\ntiny {verdict} the target ({100 * mean.overhead:.1f}%), but it writes random text: no proposal is "
              f"valid and no answer parses, so the executor and the store are hardly exercised. A realistic "
              f"proportion: bench/rollout.py embedded --model smollm2 --batch-size 2 --steps 2 "
              f"--max-response-tokens 256 --micro-batch-size 1 (or --then-smollm2)"
              + (f"; smollm2 is not installed: {smollm2_missing}" if smollm2_missing else ""))
        if args.then_smollm2 and not smollm2_missing:
            realistic = argparse.Namespace(**{**vars(args), "steps": args.smollm2_steps,
                                              "max_response_tokens": args.smollm2_max_response_tokens,
                                              "micro_batch_size": args.smollm2_micro_batch_size})
            print_embedded(realistic, "smollm2", root)
    finally:
        if args.keep:
            print(f"\nrun directories kept in {root}", file=sys.stderr)
        else:
            shutil.rmtree(root, ignore_errors=True)


def distributed(args: argparse.Namespace) -> None:
    """The distributed mode: the stack on loopback, the coordinator's split and the trainer's updates."""
    from bench.rollout_stack import StackOptions, run_stack

    reason = model_unavailable(args.model)
    if reason:
        raise SystemExit(f"model {args.model} unavailable: {reason}")
    root = Path(tempfile.mkdtemp(prefix="azr-bench-rollout-dist-"))
    before = load_note()
    try:
        result = run_stack(StackOptions(
            model=args.model, steps=args.steps, batch_size=args.batch_size,
            max_response_tokens=args.max_response_tokens, learnability_samples=args.learnability_samples,
            max_staleness=args.max_staleness, micro_batch_size=args.micro_batch_size,
            executor_processes=args.executor_processes, torch_threads=args.torch_threads,
            seed_files=seed_files(args.seed_rows, root / "seeds"),
            redis_url=args.redis_url, postgres_url=args.postgres_url, timeout_s=args.timeout_s), root)
    finally:
        if args.keep:
            print(f"\nlogs and run directory kept in {root}", file=sys.stderr)
        else:
            shutil.rmtree(root, ignore_errors=True)
    splits = splits_from_run(result.lines, result.clock)
    print(f"\n### distributed on loopback, model {args.model}: B = {args.batch_size}, n = {args.learnability_samples}, "
          f"max response tokens {args.max_response_tokens}, max staleness {args.max_staleness}, torch threads "
          f"{args.torch_threads or 'default'}, "
          f"{args.executor_processes} RQ executor worker process(es), {len(splits)} step(s)\n")
    timed = sum(result.clock.wall(int(line["step"])) is not None for line in result.lines)
    print(f"machine: {before} (before), {load_note()} (after); set-up not in the tables: services ready "
          f"{result.startup_s:.1f} s, seed import through RQ {result.seeding_s:.1f} s; steps timed from the "
          f"coordinator's progress lines: {timed} of {len(splits)}\n")
    print("coordinator (training runs in the trainer process, overlapping the next step):\n")
    print(split_table(splits, COORDINATOR_PHASES, show_wait=True))
    print("\ntrainer (`trainer_metrics.jsonl`; batch/version moments polled from Redis every 20 ms):\n")
    print(trainer_table(result.updates))


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """Command line of both modes."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    modes = parser.add_subparsers(dest="mode", required=True)
    for name, steps, run in (("embedded", 3, embedded), ("distributed", 2, distributed)):
        mode = modes.add_parser(name, help=f"the {name} profile")
        mode.set_defaults(run=run)
        mode.add_argument("--model", default="tiny", help="tiny, smollm2, qwen-coder-0.5b or an HF directory")
        mode.add_argument("--steps", type=int, default=steps)
        mode.add_argument("--batch-size", type=int, default=2, help="B per (task type x role)")
        mode.add_argument("--max-response-tokens", type=int, default=128)
        mode.add_argument("--learnability-samples", type=int, default=8, help="n solver samples per proposal")
        mode.add_argument("--micro-batch-size", type=int, default=4,
                          help="trainer rows per forward/backward; on CPU a ~2k-token smollm2 row adds ~5 GB at "
                               "peak (attention probabilities kept for the backward; 7 GB RSS at 1), so use 1 there")
        mode.add_argument("--seed-rows", type=int, default=0,
                          help="import only the first N rows of each seed file (0: all)")
        mode.add_argument("--keep", action="store_true", help="keep the run directory (and logs) afterwards")
        mode.add_argument("--torch-threads", type=int, default=0,
                          help="torch intra-op threads of the engine and trainer (0: torch's default, one per "
                               "core); on a machine shared with other work, 1 avoids threads waiting on each other")
    emb = modes.choices["embedded"]
    emb.add_argument("--executor-workers", type=int, default=2, help="sandbox workers (embedded default 2)")
    emb.add_argument("--then-smollm2", action="store_true",
                     help="after tiny, also run smollm2 (if installed) with the --smollm2-* sizes")
    emb.add_argument("--smollm2-steps", type=int, default=2)
    emb.add_argument("--smollm2-max-response-tokens", type=int, default=256)
    emb.add_argument("--smollm2-micro-batch-size", type=int, default=1, help="see --micro-batch-size")
    emb.add_argument("--verbose", action="store_true", help="echo the loop's progress lines to stderr")
    dist = modes.choices["distributed"]
    dist.add_argument("--max-staleness", type=int, default=1, help="0 makes each step wait for the last update")
    dist.add_argument("--executor-processes", type=int, default=2, help="`azr worker executor` processes")
    dist.add_argument("--redis-url", default=os.environ.get("AZR_REDIS_URL", "redis://127.0.0.1:6379/0"))
    dist.add_argument("--postgres-url", default=os.environ.get(
        "AZR_DATABASE_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test"),
        help="a server the script may create (and drop) a private database on")
    dist.add_argument("--timeout-s", type=float, default=1800, help="longest wait for the coordinator/trainer")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> None:
    """Run the chosen mode."""
    args = parse_args(argv)
    sys.stdout.reconfigure(line_buffering=True)  # type: ignore[union-attr]
    print(f"rollout benchmark ({args.mode}); target: overhead (wall − generation − training) < "
          f"{100 * OVERHEAD_TARGET:.0f}% of the step wall time")
    args.run(args)


if __name__ == "__main__":
    main()
