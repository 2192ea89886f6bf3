"""The FSDP trainer's throughput under torchrun: TRR++ updates/s, tokens/s and MFU of N ranks on one batch.

Every rank builds the trainer exactly as `azr trainer` under torchrun does (`build_trainer` with the rank layout:
FSDP2 shards, bf16 mixed precision on CUDA); rank 0 drives the updates with the real command protocol and the
others follow. The same batch (bench/trainer.py's random episodes) is applied after one warm-up update, and rank 0
prints the median update time, response tokens/s, all tokens/s and MFU across all ranks' peak.

    torchrun --standalone --nproc_per_node N bench/trainer_fsdp.py --model DIR [--random-init] [--per-group 16]
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))

import torch  # noqa: E402

from bench.model_flops import mfu, peak_tflops, update_flops  # noqa: E402
from bench.trainer import FULL_UPDATE, make_episodes, random_init_model  # noqa: E402
from services.inference.model_registry import resolve_model  # noqa: E402
from services.settings import Settings  # noqa: E402
from trainer_svc.distributed_env import init_from_torchrun, shutdown  # noqa: E402
from trainer_svc.rank_follower import follow_main_rank, release_followers  # noqa: E402
from trainer_svc.resume import LoadedPolicy, build_trainer, load_model_and_tokenizer  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="tiny")
    parser.add_argument("--device", default="auto")
    parser.add_argument("--random-init", action="store_true")
    parser.add_argument("--per-group", type=int, default=4)
    parser.add_argument("--prompt-len", type=int, default=256)
    parser.add_argument("--response-len", type=int, default=128)
    parser.add_argument("--micro-batch-size", type=int, default=4)
    parser.add_argument("--micro-batch-tokens", type=int, default=Settings().trainer.micro_batch_tokens)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--bf16", action=argparse.BooleanOptionalAction, default=True)
    parser.add_argument("--peak-tflops", type=float, default=None)
    parser.add_argument("--run-dir", type=Path, default=Path("/tmp/azr-bench-fsdp"))
    args = parser.parse_args()

    ranks = init_from_torchrun(args.device)
    settings = Settings(device=args.device, micro_batch_size=args.micro_batch_size,
                        micro_batch_tokens=args.micro_batch_tokens, trainer_bf16=args.bf16, **FULL_UPDATE)
    model_dir = resolve_model(args.model)
    model, tokenizer = random_init_model(model_dir) if args.random_init else load_model_and_tokenizer(model_dir)
    episodes = make_episodes(model.config.vocab_size, args.per_group, args.prompt_len, args.response_len)
    flops = update_flops(model, [(len(e.prompt_ids), len(e.response_ids)) for e in episodes])  # before sharding
    loaded = LoadedPolicy(trainer=build_trainer(model, tokenizer, settings.trainer, ranks), tokenizer=tokenizer,
                          source=model_dir)
    if not ranks.is_main:
        follow_main_rank(loaded, settings.trainer, args.run_dir, settings.resolved())
        shutdown()
        return

    trainer = loaded.trainer
    trainer.update(episodes)  # warm-up: allocator, AdamW state, NCCL communicators
    reports = [trainer.update(episodes) for _ in range(args.repeats)]
    release_followers(loaded)
    seconds = statistics.median(r.step_time_s for r in reports)
    tokens = sum(len(e.response_ids) for e in episodes)
    all_tokens = sum(len(e.prompt_ids) + len(e.response_ids) for e in episodes)
    peak = peak_tflops(ranks.device, args.peak_tflops)
    share = mfu(flops, seconds, None if peak is None else peak * ranks.world_size)
    where = torch.cuda.get_device_name(ranks.device) if ranks.device.type == "cuda" else "CPU"
    print(f"FSDP trainer, {ranks.world_size} rank(s) on {where}, model {args.model}"
          f"{' (random init)' if args.random_init else ''}, bf16 {args.bf16 and ranks.device.type == 'cuda'}")
    print(f"  {len(episodes)} episodes, {tokens} response tokens ({all_tokens} with prompts), "
          f"micro-batch {args.micro_batch_size}")
    print(f"  update {seconds:.3f} s (median of {args.repeats}): {tokens / seconds:.1f} response tokens/s, "
          f"{all_tokens / seconds:.1f} tokens/s"
          + (f", MFU {100 * share:.1f}% of {ranks.world_size} x {peak:.0f} TFLOP/s" if share is not None else ""))
    print(f"  peak memory rank 0: {reports[-1].peak_memory_mb:.0f} MiB ({reports[-1].memory_kind}); "
          f"loss {reports[-1].loss:.4f}, grad norm {reports[-1].grad_norm:.3g}")
    shutdown()


if __name__ == "__main__":
    main()
