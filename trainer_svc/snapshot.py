"""A LoRA run's portable snapshot: its adapter weights alone, in one file a repository can hold.

Why: a run's directory (buffers, checkpoints with AdamW moments, ~100 MB each) lives outside the work tree and may not
survive a change of machine. The snapshot is what is kept in its place: one safetensors file of the latest
checkpoint's adapter weights in bf16, its header holding the adapter config, the trainer step, policy version and run
step it was taken at and the base model's name. A new run started with `lora_init_adapter` set to it begins from
those weights and numbers its steps after the run step; its AdamW moments restart from zero and its buffers from the
seed files (the run's log says so at its first step).

    python -m trainer_svc.snapshot RUN_DIR OUT_FILE [--model NAME] [--run-step N]   # the latest checkpoint's
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch
from torch import nn

from services.json_types import JsonObject

SNAPSHOT_VERSION = 1
PEFT_PREFIX = "base_model.model."


def write_snapshot(checkpoint: Path, target: Path, *, model: str, step: int, policy_version: int,
                   run_step: int | None = None, origin: str = "run checkpoint", note: str = "") -> Path:
    """Write ``checkpoint``'s adapters (a LoRA checkpoint directory) as one bf16 safetensors file at ``target``;
    ``step``: the trainer's; ``run_step``: the run's last step (default ``step``: they differ when a step made no
    update); ``origin`` says what made them ("run checkpoint", or "format-warmup": trainer_svc/format_warmup.py)."""
    from safetensors.torch import load_file, save_file

    from trainer_svc.lora import ADAPTER_CONFIG_FILE, ADAPTER_WEIGHTS_FILE

    tensors = {key: value.to(torch.bfloat16).contiguous()
               for key, value in load_file(str(Path(checkpoint) / ADAPTER_WEIGHTS_FILE)).items()}
    config = json.loads((Path(checkpoint) / ADAPTER_CONFIG_FILE).read_text())
    config["base_model_name_or_path"] = model  # the model's name, not this machine's path to it
    metadata = {"azr_snapshot_version": str(SNAPSHOT_VERSION), "adapter_config": json.dumps(config, sort_keys=True),
                "model": model, "step": str(step), "policy_version": str(policy_version),
                "run_step": str(step if run_step is None else run_step),
                "checkpoint": Path(checkpoint).name, "origin": origin, "note": note}
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = target.with_name(f".{target.name}.partial")
    save_file(tensors, str(staging), metadata=metadata)
    staging.replace(target)
    return target


def snapshot_metadata(path: Path) -> JsonObject:
    """The snapshot's header: adapter config (parsed), model, trainer step, policy version, run step (the trainer
    step in snapshots written before it was recorded), origin and note."""
    from safetensors import safe_open

    with safe_open(str(path), framework="pt") as handle:
        metadata = dict(handle.metadata() or {})
    if metadata.get("azr_snapshot_version") != str(SNAPSHOT_VERSION):
        raise ValueError(f"{path} is not an AZR adapter snapshot (version {SNAPSHOT_VERSION})")
    return {"adapter_config": json.loads(metadata["adapter_config"]), "model": metadata["model"],
            "step": int(metadata["step"]), "policy_version": int(metadata["policy_version"]),
            "run_step": int(metadata.get("run_step") or metadata["step"]),
            "origin": metadata.get("origin", "run checkpoint"), "note": metadata.get("note", "")}


def load_snapshot(model: nn.Module, path: Path, *, rank: int, alpha: float) -> None:
    """Put the snapshot's adapter weights into ``model`` (built by `add_adapters` with the same rank and alpha);
    ValueError when its LoRA shape differs or a tensor does not fit."""
    from peft import set_peft_model_state_dict
    from safetensors.torch import load_file

    from trainer_svc.lora import ADAPTER

    config = snapshot_metadata(path)["adapter_config"]
    if config["r"] != rank or float(config["lora_alpha"]) != float(alpha):
        raise ValueError(f"{path} holds rank {config['r']}, alpha {config['lora_alpha']} adapters; the settings ask "
                         f"for rank {rank}, alpha {alpha}")
    state = {key.removeprefix(PEFT_PREFIX): value.to(torch.float32) for key, value in load_file(str(path)).items()}
    unexpected = list(set_peft_model_state_dict(model, state, adapter_name=ADAPTER).unexpected_keys)  # type: ignore[attr-defined]
    expected = {name for name, parameter in model.named_parameters() if parameter.requires_grad}
    if unexpected or len(state) != len(expected):
        raise ValueError(f"{path}: adapter weights do not fit the model ({len(state)} tensors for {len(expected)} "
                         f"adapter parameters; unexpected {unexpected[:3]})")


def main() -> None:
    from trainer_svc.checkpoints import latest_checkpoint, load_trainer_state

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("--model", default="", help="the base model's name, recorded in the header")
    parser.add_argument("--run-step", type=int, default=None,
                        help="the run's last step (default: the last step of RUN_DIR/metrics.jsonl)")
    args = parser.parse_args()
    checkpoint = latest_checkpoint(args.run_dir)
    if checkpoint is None:
        raise SystemExit(f"{args.run_dir} has no checkpoint")
    state = load_trainer_state(checkpoint, mmap=True)
    run_step = args.run_step if args.run_step is not None else last_metrics_step(args.run_dir)
    write_snapshot(checkpoint, args.out, model=args.model, step=state.step, policy_version=state.policy_version,
                   run_step=run_step)
    print(f"snapshot of {checkpoint} (trainer step {state.step}, policy version {state.policy_version}, run step "
          f"{run_step if run_step is not None else state.step}): {args.out}")


def last_metrics_step(run_dir: Path) -> int | None:
    """The last step of the run's metrics.jsonl; None without one."""
    path = Path(run_dir) / "metrics.jsonl"
    if not path.is_file():
        return None
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    steps = [int(row["step"]) for row in rows if "step" in row]
    return max(steps, default=None)


if __name__ == "__main__":
    main()
