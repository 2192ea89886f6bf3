"""What `prompt_gradient = false` saves and what it changes, on a run's own episodes and policy.

For episodes of one recorded step (those whose Eq 8 advantage is not 0, one sequence per pass, as the update sees
them), the policy-gradient term A·Σ log π(response) is backpropagated twice: through the whole sequence (the paper)
and with the prompt's forward outside autograd (`trainer_svc/policy_forward.py`). Printed per episode: prompt and
response tokens, the seconds of each pass (forward, recomputation, backward), and how far the frozen-prompt gradient
of the trainable parameters (the LoRA adapters) is from the full one: cosine and norm ratio; then the same for the sum
over the episodes (the step's update direction, up to the token-mean's constant).

    .venv/bin/python bench/prompt_gradient.py --run-dir ~/azr-runs/selfplay-cpu --step 6 \
        --adapters docs/runs/selfplay-cpu/snapshot/adapters.safetensors --out bench/results/prompt_gradient.json
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))

import torch  # noqa: E402

from services.algorithm.policy_objective import trr_advantages  # noqa: E402
from services.records import Episode  # noqa: E402
from services.settings import Settings  # noqa: E402
from trainer_svc.batching import build_micro_batches  # noqa: E402
from trainer_svc.policy_forward import logprobs_and_entropy  # noqa: E402


def step_episodes(run_dir: Path, step: int) -> list[Episode]:
    from services.store import open_store

    store = open_store(f"sqlite:///{run_dir / 'buffers.sqlite3'}")
    try:
        run_id = run_dir.name
        episodes, total = store.list_episodes(run_id, step=step, limit=500)
        if not episodes:
            raise SystemExit(f"{run_dir}: no episodes recorded for step {step}")
        return episodes[:total]
    finally:
        store.close()


def chosen(episodes: list[Episode], advantages: torch.Tensor, count: int) -> list[tuple[Episode, float]]:
    """Up to ``count`` episodes with a non-zero advantage, one per (task type, role) group first, longest prompt
    first within a group."""
    signal = sorted(((e, float(a)) for e, a in zip(episodes, advantages, strict=True) if abs(float(a)) > 1e-6),
                    key=lambda pair: -len(pair[0].prompt_ids))
    picked, groups = [], set()
    for pair in signal:
        group = (pair[0].task_type, pair[0].role)
        if group not in groups:
            picked.append(pair)
            groups.add(group)
    picked += [pair for pair in signal if pair not in picked]
    return picked[:count]


def policy(model: str, adapters: Path | None, settings: Settings) -> torch.nn.Module:
    from services.inference.model_registry import resolve_model
    from trainer_svc.activation_checkpointing import checkpoint_decoder_layers
    from trainer_svc.lora import add_adapters
    from trainer_svc.resume import load_model_and_tokenizer
    from trainer_svc.snapshot import load_snapshot

    model_dir = Path(resolve_model(model))
    network, _ = load_model_and_tokenizer(model_dir)
    lora = settings.trainer.lora
    network = add_adapters(network, lora, model_dir)
    if adapters is not None:
        load_snapshot(network, adapters, rank=lora.lora_rank, alpha=lora.lora_alpha)
    checkpoint_decoder_layers(network)  # as the embedded profile trains
    return network.eval()


def gradient_of(network: torch.nn.Module, episode: Episode, advantage: float, *,
                prompt_gradient: bool) -> tuple[torch.Tensor, float]:
    """(flattened gradient of the trainable parameters, seconds) of A·Σ log π over one episode."""
    mb = build_micro_batches([episode], torch.tensor([advantage]), pad_id=0, micro_batch_size=1)[0]
    network.zero_grad(set_to_none=True)
    began = time.perf_counter()
    logprobs, _ = logprobs_and_entropy(network, mb, with_entropy=False, prompt_gradient=prompt_gradient)
    (advantage * logprobs[mb.response_mask].sum()).backward()
    seconds = time.perf_counter() - began
    flat = torch.cat([p.grad.flatten() for p in network.parameters() if p.requires_grad and p.grad is not None])
    return flat, seconds


def compare(full: torch.Tensor, frozen: torch.Tensor) -> dict[str, float]:
    return {"cosine": float(torch.nn.functional.cosine_similarity(full, frozen, dim=0)),
            "norm_ratio": float(frozen.norm() / full.norm().clamp_min(1e-30))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--run-dir", type=Path, required=True)
    parser.add_argument("--step", type=int, required=True)
    parser.add_argument("--model", default="qwen-coder-1.5b")
    parser.add_argument("--adapters", type=Path, default=None, help="a snapshot (default: zero-initialised LoRA)")
    parser.add_argument("--episodes", type=int, default=4)
    parser.add_argument("--lora-rank", type=int, default=16)
    parser.add_argument("--lora-alpha", type=float, default=32.0)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    settings = Settings(lora_rank=args.lora_rank, lora_alpha=args.lora_alpha)
    episodes = step_episodes(args.run_dir.expanduser(), args.step)
    advantages = trr_advantages(episodes, settings.trainer.trr_statistics)
    picked = chosen(episodes, advantages, args.episodes)
    network = policy(args.model, args.adapters, settings)
    rows, sums = [], {True: None, False: None}
    for episode, advantage in picked:
        row: dict[str, object] = {"task_type": str(episode.task_type), "role": str(episode.role),
                                  "prompt_tokens": len(episode.prompt_ids),
                                  "response_tokens": len(episode.response_ids), "advantage": round(advantage, 4)}
        grads = {}
        for prompt_gradient in (True, False):
            grads[prompt_gradient], row["full_s" if prompt_gradient else "frozen_s"] = gradient_of(
                network, episode, advantage, prompt_gradient=prompt_gradient)
            total = sums[prompt_gradient]
            sums[prompt_gradient] = grads[prompt_gradient] if total is None else total + grads[prompt_gradient]
        row.update(compare(grads[True], grads[False]))
        rows.append(row)
        print(f"{row['task_type']:>9} {row['role']:>7}  prompt {row['prompt_tokens']:5d}  response "
              f"{row['response_tokens']:4d}  A {advantage:+.2f}  full {row['full_s']:6.1f} s  frozen "
              f"{row['frozen_s']:6.1f} s  cosine {row['cosine']:.3f}  norm ratio {row['norm_ratio']:.3f}",
              flush=True)
    assert sums[True] is not None and sums[False] is not None
    summary = {"episodes": len(rows), **compare(sums[True], sums[False]),
               "full_s": sum(float(r["full_s"]) for r in rows), "frozen_s": sum(float(r["frozen_s"]) for r in rows)}
    print(f"sum over {len(rows)} episodes: cosine {summary['cosine']:.3f}, norm ratio {summary['norm_ratio']:.3f}, "
          f"{summary['full_s']:.0f} s full, {summary['frozen_s']:.0f} s frozen "
          f"({summary['full_s'] / summary['frozen_s']:.2f}x)")
    if args.out is not None:
        args.out.write_text(json.dumps({"model": args.model, "adapters": str(args.adapters), "step": args.step,
                                        "threads": args.threads, "rows": rows, "summary": summary}, indent=1))


if __name__ == "__main__":
    main()
