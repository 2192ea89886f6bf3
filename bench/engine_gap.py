"""How far the int8 engine's log-probs are from float32's on a run's own sampled tokens, and where the gap comes from.

    .venv/bin/python bench/engine_gap.py RUN_DIR [--version V] [--limit 6] [--out bench/results/engine_gap.json]
                                          [--keep-float down_proj ...]

Takes the episodes a run's engine sampled at policy version V (default: the latest exported, `weights/vNNNNNN`, that
has episodes) and scores their response tokens, teacher-forced at T = 1, under the exported weights three ways:
float32 (what the trainer recomputes as π_old, up to LoRA's unmerged form), every Linear int8 (the engine as it
runs with `local_engine_int8`), and every Linear but the LM head int8. Prints the mean |Δ log p| per token of each
against float32 and against the log-probs the engine recorded while sampling, so the run's
`train/logprob_mismatch_abs` can be split into what the LM head's quantization costs and what the rest does.
`--keep-float NAME ...` adds a model whose Linear layers whose names end in one of NAME stay float32;
`--per-channel` adds the same models with one weight scale per output channel (`local_engine_int8_per_channel`).
Also ranks the MLP down projections by how far their inputs' largest channel stands above the median one (max |x|
over the scored tokens): dynamic quantization takes one activation scale per batch, so the top of that list is what
`local_engine_int8_keep_float` is for (e.g. `layers.2.mlp.down_proj`).
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
import time
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))

import torch  # noqa: E402

from services.inference.local_engine import load_causal_lm, quantize_linear_int8  # noqa: E402
from services.records import Episode  # noqa: E402
from services.store import open_store  # noqa: E402


@torch.inference_mode()
def response_logprobs(model: torch.nn.Module, episode: Episode) -> torch.Tensor:
    """log p of each response token after the prompt (and the response before it), T = 1: [response length]."""
    ids = torch.tensor([episode.prompt_ids + episode.response_ids])
    logits = model(input_ids=ids).logits[0, len(episode.prompt_ids) - 1:-1].float()
    return torch.log_softmax(logits, dim=-1).gather(-1, torch.tensor(episode.response_ids).unsqueeze(-1)).squeeze(-1)


@torch.inference_mode()
def down_proj_outliers(model: torch.nn.Module, sequences: list[list[int]]) -> list[tuple[str, float, float]]:
    """(module name, max |input|, max / median of the per-channel max |input|) of every MLP down projection over
    the token sequences (one forward pass each), most outlying first."""
    peaks: dict[str, torch.Tensor] = {}

    def record(name: str) -> Any:
        def hook(_module: torch.nn.Module, inputs: tuple[torch.Tensor, ...], _output: torch.Tensor) -> None:
            channel_max = inputs[0].reshape(-1, inputs[0].shape[-1]).abs().amax(0)
            peaks[name] = torch.maximum(peaks[name], channel_max) if name in peaks else channel_max
        return hook

    handles = [module.register_forward_hook(record(name)) for name, module in model.named_modules()
               if name.endswith("mlp.down_proj")]
    try:
        for ids in sequences:
            model(input_ids=torch.tensor([ids]))
    finally:
        for handle in handles:
            handle.remove()
    ranked = [(name, float(peak.max()), float(peak.max() / peak.median().clamp(min=1e-6)))
              for name, peak in peaks.items()]
    return sorted(ranked, key=lambda row: -row[2])


def run_episodes(run_dir: Path, version: int | None, limit: int) -> tuple[int, list[Episode]]:
    """(version, up to `limit` of the episodes its engine sampled, with recorded log-probs): the shortest, to bound
    the cost (three teacher-forced passes of prompt and response each)."""
    settings = json.loads((run_dir / "settings.json").read_text())
    store = open_store(f"sqlite:///{run_dir / 'buffers.sqlite3'}")
    try:
        episodes, offset = [], 0
        while True:
            page, total = store.list_episodes(settings["run_id"], limit=500, offset=offset)
            episodes += page
            offset += len(page)
            if not page or offset >= total:
                break
    finally:
        store.close()
    exported = sorted(int(p.name[1:]) for p in (run_dir / "weights").glob("v*"))
    sampled = {e.policy_version for e in episodes if e.behaviour_logprobs}
    candidates = [v for v in exported if v in sampled] if version is None else [version]
    if not candidates:
        raise SystemExit(f"no exported weights in {run_dir / 'weights'} sampled any recorded episode")
    chosen = candidates[-1]
    mine = [e for e in episodes if e.policy_version == chosen and e.behaviour_logprobs and e.response_ids]
    return chosen, sorted(mine, key=lambda e: len(e.prompt_ids) + len(e.response_ids))[:limit]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--version", type=int)
    parser.add_argument("--limit", type=int, default=6)
    parser.add_argument("--out", type=Path)
    parser.add_argument("--keep-float", nargs="*", default=[], metavar="NAME")
    parser.add_argument("--per-channel", action="store_true")
    parser.add_argument("--top", type=int, default=8, help="down projections listed by outlier ratio")
    args = parser.parse_args(argv)
    version, episodes = run_episodes(args.run_dir, args.version, args.limit)
    weights = args.run_dir / "weights" / f"v{version:06d}"
    float32 = load_causal_lm(weights, torch.device("cpu"), torch.float32, progress_bar=False)
    outliers = down_proj_outliers(float32, [e.prompt_ids + e.response_ids for e in episodes])
    builds = {"int8": lambda: quantize_linear_int8(copy.deepcopy(float32)),
              "int8, head float32": lambda: quantize_linear_int8(copy.deepcopy(float32), ["lm_head"])}
    if args.keep_float:
        builds[f"int8, {'/'.join(args.keep_float)} float32"] = lambda: quantize_linear_int8(copy.deepcopy(float32),
                                                                                           args.keep_float)
    if args.per_channel:
        builds["int8 per channel"] = lambda: quantize_linear_int8(copy.deepcopy(float32), per_channel=True)
        if args.keep_float:
            builds[f"int8 per channel, {'/'.join(args.keep_float)} float32"] = lambda: quantize_linear_int8(
                copy.deepcopy(float32), args.keep_float, per_channel=True)
    tokens = sum(len(e.response_ids) for e in episodes)
    print(f"{args.run_dir.name} v{version}: {len(episodes)} episodes, {tokens} response tokens; "
          f"{torch.get_num_threads()} threads")
    scores: dict[str, list[torch.Tensor]] = {}
    seconds: dict[str, float] = {}
    for name, build in [("float32", lambda: float32), *builds.items()]:
        model = build()  # one quantized copy alive at a time: each is ~0.7 GB beside the float32 model
        started = time.perf_counter()
        scores[name] = [response_logprobs(model, e) for e in episodes]
        seconds[name] = round(time.perf_counter() - started, 1)
        del model
    recorded = [torch.tensor(e.behaviour_logprobs) for e in episodes]
    reference = torch.cat(scores["float32"])
    result: dict[str, Any] = {"run": args.run_dir.name, "version": version, "episodes": len(episodes),
                              "tokens": tokens, "models": {},
                              "down_proj_outliers": [{"module": name, "max_abs": round(peak, 1),
                                                      "max_over_median": round(ratio, 1)}
                                                     for name, peak, ratio in outliers]}
    print("| model | mean \\|Δ log p\\| vs float32 | vs the engine's recorded | max vs float32 | s |")
    print("|---|---|---|---|---|")
    for name in scores:
        mine = torch.cat(scores[name])
        row = {"vs_float32": round(float((mine - reference).abs().mean()), 4),
               "vs_recorded": round(float((mine - torch.cat(recorded)).abs().mean()), 4),
               "max_vs_float32": round(float((mine - reference).abs().max()), 3), "seconds": seconds[name]}
        result["models"][name] = row
        print(f"| {name} | {row['vs_float32']} | {row['vs_recorded']} | {row['max_vs_float32']} | {row['seconds']} |")
    print(f"\nMLP down projections by outlier ratio (top {args.top} of {len(outliers)}):")
    print("| module | max \\|input\\| | max / median channel |")
    print("|---|---|---|")
    for name, peak, ratio in outliers[:args.top]:
        print(f"| {name} | {peak:.1f} | {ratio:.0f} |")
    if args.out:
        args.out.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
