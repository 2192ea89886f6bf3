"""What the trainer pushes after every update: the policy's weights alone, in bf16, as a Hugging Face directory
(`config.json` + `model.safetensors`) that SGLang's `update_weights_from_disk` and `LocalEngine.update_weights` load.

Why not the checkpoint: the full resumable checkpoint (fp32 weights, two fp32 AdamW moments, RNG, fsync) is 8x the
bytes of bf16 weights (0.5B: 7.1 GB against 0.99 GB) and is only needed to resume, so it is written every
`checkpoint_every` updates (trainer_svc/checkpoints.py) while these are written every update. The servers serve in
bf16 anyway, so nothing they load is lost by the cast.

Layout: `<run_dir>/weights/vNNNNNN/`, written in a staging directory and renamed into place, so a server never sees a
half-written directory; the newest `KEEP_PUSHED` are kept (the one every server serves, and the one before it while a
push is under way). No fsync: after a crash these are never read again (the trainer resumes from the last full
checkpoint and exports anew), and a rename is enough for readers on shared storage to see complete files. A
restored trainer's export also deletes those of later versions: they were never checkpointed and are made anew.

Under torchrun every rank calls `export_weights` (rank 0 first announces it): all gather the full weights, rank 0
writes, all wait for it.

With LoRA adapters (trainer_svc/lora.py) the export is, by default, the merged policy, base + scale·B·A, under the
base model's parameter names: a plain HF directory like any other push, computed beside the training weights. An
engine that applies adapters itself (the llama.cpp engine) takes the `adapter` form instead: the PEFT adapter
directory alone (`save_adapters`: tens of MB instead of the whole model in bf16, written in a fraction of the time).
"""

from __future__ import annotations

import json
import re
import shutil
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import torch
from torch import nn

from services.compute.process_memory import release_free_memory
from services.inference.causal_lm import hf_model
from services.json_types import JsonObject
from trainer_svc.checkpoints import checkpoint_name
from trainer_svc.lora import has_adapters, merged_state_dict, save_adapters

if TYPE_CHECKING:
    from trainer_svc.resume import LoadedPolicy

WEIGHTS_DIR = "weights"
KEEP_PUSHED = 2
SERVING_DTYPE = torch.bfloat16

PushForm = Literal["merged", "adapter"]
"""What a push holds: the whole policy as an HF directory, or (LoRA only) the PEFT adapter directory."""

_NAME = re.compile(r"^v(\d{6,})$")
_TEMP_PREFIX = ".tmp-"


def weights_root(run_dir: Path) -> Path:
    """Where a run keeps the weights it pushes."""
    return Path(run_dir) / WEIGHTS_DIR


def list_pushed_weights(run_dir: Path) -> list[Path]:
    """Complete pushed-weight directories of the run, oldest first."""
    root = weights_root(run_dir)
    if not root.is_dir():
        return []
    found = [(int(m.group(1)), p) for p in root.iterdir() if p.is_dir() and (m := _NAME.match(p.name))]
    return [p for _, p in sorted(found)]


def serving_state(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The state dict with every floating tensor cast to bf16 (other tensors as they are); tensors that share storage
    (tied embeddings and LM head) still share it, so `save_pretrained` drops the tied copy as it does for the model."""
    cast: dict[tuple[int, torch.Size, tuple[int, ...]], torch.Tensor] = {}
    out = {}
    for name, tensor in state.items():
        tensor = tensor.detach()
        if not tensor.is_floating_point():
            out[name] = tensor
            continue
        key = (tensor.data_ptr(), tensor.shape, tensor.stride())
        if key not in cast:
            cast[key] = tensor.to(SERVING_DTYPE)
        out[name] = cast[key]
    return out


def write_serving_weights(run_dir: Path, model: nn.Module, policy_version: int,
                          state: dict[str, torch.Tensor] | None = None, form: PushForm = "merged") -> Path:
    """Write ``model``'s weights (or ``state``, the full state an FSDP rank 0 gathered) in bf16 as
    ``weights/v{policy_version}``, replacing an earlier export of the same version (a restored trainer exports its
    checkpoint's version again); returns the directory. Keeps the newest `KEEP_PUSHED`. A model with LoRA adapters
    is written merged, or as its adapter directory alone with ``form="adapter"``."""
    if form == "adapter" and not has_adapters(model):
        raise ValueError("an adapter push needs a model with LoRA adapters (lora_rank > 0)")
    if state is None and form == "merged":
        state = merged_state_dict(model, SERVING_DTYPE) if has_adapters(model) else model.state_dict()
    root = weights_root(run_dir)
    root.mkdir(parents=True, exist_ok=True)
    for stale in root.glob(_TEMP_PREFIX + "*"):  # an export a crash interrupted
        shutil.rmtree(stale, ignore_errors=True)
    final = root / checkpoint_name(policy_version)
    staging = Path(tempfile.mkdtemp(prefix=_TEMP_PREFIX + final.name + "-", dir=root))
    try:
        if form == "adapter":
            save_adapters(model, staging)
        else:
            assert state is not None
            hf_model(model).save_pretrained(staging, safe_serialization=True, state_dict=serving_state(state))
            _mark_dtype(staging / "config.json")
        if final.exists():
            shutil.rmtree(final)
        staging.rename(final)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    _prune(run_dir, policy_version)
    return final


def _prune(run_dir: Path, policy_version: int) -> None:
    """Delete exports of versions after ``policy_version`` (a restored trainer's: versions that never became durable
    and will be made anew), then all but the newest `KEEP_PUSHED`."""
    kept = []
    for path in list_pushed_weights(run_dir):
        if int(path.name[1:]) > policy_version:
            shutil.rmtree(path, ignore_errors=True)
        else:
            kept.append(path)
    for old in kept[:-KEEP_PUSHED]:
        shutil.rmtree(old, ignore_errors=True)


def _mark_dtype(config_path: Path) -> None:
    """Say bf16 in config.json (`dtype`, and `torch_dtype` where an older transformers wrote it), so a server that
    takes the dtype from the config (SGLang's `--dtype auto`) serves what was written."""
    config: JsonObject = json.loads(config_path.read_text())
    config["dtype"] = "bfloat16"
    if "torch_dtype" in config:
        config["torch_dtype"] = "bfloat16"
    config_path.write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")


def export_weights(loaded: LoadedPolicy, run_dir: Path, *, policy_version: int, form: PushForm = "merged") -> Path:
    """Export the trainer's current weights as ``policy_version`` (which becomes the trainer's policy version: the
    version these weights are served as), merged or as the adapters alone (``form``, one process only). Under
    torchrun every rank calls this: rank 0 announces it, all gather, rank 0 writes, all wait."""
    trainer = loaded.trainer
    trainer.policy_version = policy_version
    ranks = trainer.ranks
    if ranks is None:
        path = write_serving_weights(run_dir, trainer.model, policy_version, form=form)
        release_free_memory()  # the merged and bf16 copies just freed (services/compute/process_memory.py)
        return path
    from trainer_svc.distributed_env import wait_for_all
    from trainer_svc.fsdp_wrap import gather_full_weights
    from trainer_svc.rank_commands import ExportCommand, announce

    if ranks.is_main:
        announce(ranks, ExportCommand(policy_version=policy_version))
    weights = gather_full_weights(trainer.model)
    path = weights_root(run_dir) / checkpoint_name(policy_version)
    if ranks.is_main:
        path = write_serving_weights(run_dir, trainer.model, policy_version, state=weights)
    del weights
    release_free_memory()
    wait_for_all(ranks)
    return path
