"""LoRA through PEFT (`lora_rank` > 0): adapters trained on the fp32 base, adapters-only checkpoints, merged pushes.

Why: full fine-tuning keeps fp32 weights, gradients and two AdamW moments for every parameter and writes all of them
in every full checkpoint (0.5B: 7.1 GB). With LoRA only the adapters get gradients, optimizer state and checkpoint
bytes (r=16: 106 MB); the frozen base is read again from the model directory the checkpoint names.

- `add_adapters` injects PEFT's LoRA layers into the HF causal LM in place and returns that same model, not the
  `PeftModel` wrapper (whose ``base_model`` is PEFT's tuner, while the trainer's forward takes ``model.base_model``
  as the backbone). Only ``lora_A`` / ``lora_B`` require grad, so `make_optimizer` builds AdamW over them alone; the
  decoder layers stay where `activation_checkpointing` wraps them, with the LoRA branch inside each one.
- Checkpoints (`save_adapters`) are PEFT adapter directories (`PeftModel.from_pretrained` loads them) plus
  `lora_base.json`: the base model's directory and fingerprint; `base_for_restore` refuses another base.
- Pushes (`merged_state_dict`): base + scale·B·A under the base model's names, computed beside the training
  weights (never merged into them), so servers load a plain HF directory.

Limits: one process only (no FSDP sharding of adapters: `refuse_under_fsdp`); targets must be Linear layers not tied
to another weight; the fingerprint reads the config, the weight files' sizes and samples of their bytes, not every
byte. The trainer runs the policy in ``eval()``; `lora_dropout` > 0 puts only the adapters' dropout in train mode.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import torch
from torch import nn

from services.inference.causal_lm import hf_model
from services.json_types import JsonObject
from services.settings import LoraSettings

if TYPE_CHECKING:  # peft is imported where it is used (slow to import)
    from peft import LoraConfig
    from peft.tuners.lora import LoraLayer

ADAPTER = "default"
ADAPTER_CONFIG_FILE = "adapter_config.json"  # PEFT's file names, so a checkpoint is a PEFT adapter directory
ADAPTER_WEIGHTS_FILE = "adapter_model.safetensors"
BASE_RECORD_FILE = "lora_base.json"
_SAMPLES, _SAMPLE_BYTES = 16, 1 << 16


def lora_config(settings: LoraSettings) -> LoraConfig:
    """The PEFT `LoraConfig` of the settings (`lora_rank`, `lora_alpha`, `lora_dropout`, `lora_target_modules`)."""
    from peft import LoraConfig

    # PEFT annotates lora_alpha as int; it only computes alpha / r with it, and our alpha may be fractional
    return LoraConfig(r=settings.lora_rank, lora_alpha=settings.lora_alpha,  # type: ignore[arg-type]
                      lora_dropout=settings.lora_dropout, target_modules=list(settings.lora_target_modules),
                      bias="none", task_type="CAUSAL_LM")


def refuse_under_fsdp(settings: LoraSettings) -> None:
    """Raise when LoRA is asked for under torchrun: the FSDP trainer shards and gathers full weights only."""
    if settings.lora_rank > 0:
        raise ValueError(f"lora_rank={settings.lora_rank} (LoRA) is not supported by the multi-rank FSDP trainer "
                         "(torchrun): run the trainer as one process, or set AZR_LORA_RANK=0 for full fine-tuning")


@contextlib.contextmanager
def peft_on_transformers5() -> Iterator[None]:
    """Around a PEFT call that wraps a model: PEFT (0.21, the latest) reads `is_gradient_checkpointing`, which
    transformers 5 renamed and warns about on every read (FutureWarning); only that warning is dropped."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*is_gradient_checkpointing.*", category=FutureWarning)
        yield


def add_adapters(model: nn.Module, settings: LoraSettings, base_dir: Path) -> nn.Module:
    """Inject LoRA adapters into ``model`` (in place), freeze every base weight; returns the same model object."""
    from peft import get_peft_model

    config = lora_config(settings)
    config.base_model_name_or_path = str(base_dir)
    with peft_on_transformers5():
        wrapped = get_peft_model(model, config).get_base_model()
    if not lora_layers(wrapped):
        raise ValueError(f"lora_target_modules {list(settings.lora_target_modules)} match no module of "
                         f"{type(model).__name__}")
    return wrapped


def lora_layers(model: nn.Module) -> dict[str, LoraLayer]:
    """The model's PEFT LoRA layers by module name (empty: no adapters)."""
    from peft.tuners.lora import LoraLayer

    return {name: module for name, module in model.named_modules() if isinstance(module, LoraLayer)}


def has_adapters(model: nn.Module) -> bool:
    """Whether ``model`` carries LoRA adapters (PEFT keeps their config on it)."""
    return bool(getattr(model, "peft_config", None)) and bool(lora_layers(model))


def train_dropout(model: nn.Module) -> None:
    """Put the adapters' dropout (PEFT's ``lora_dropout``) in train mode; the rest of the model stays in eval."""
    for layer in lora_layers(model).values():
        layer.lora_dropout.train()


def merged_state_dict(model: nn.Module, dtype: torch.dtype | None = None) -> dict[str, torch.Tensor]:
    """The base model's state dict with each adapted weight replaced by base + scale·B·A (new tensors, summed in the
    weights' dtype then cast to ``dtype`` when given: the training weights are not touched), under the base model's
    names; other tensors are the model's own (tied ones still share storage)."""
    layers = lora_layers(model)
    merged: dict[str, torch.Tensor] = {}
    with torch.no_grad():
        for key, tensor in model.state_dict().items():
            layer_name, rest = _owning_layer(key, layers)
            if layer_name is None:
                merged[key] = tensor
            elif rest.startswith("base_layer."):  # the adapted Linear's own weight / bias; lora_* tensors dropped
                leaf = rest.removeprefix("base_layer.")
                merged[f"{layer_name}.{leaf}"] = _merged(layers[layer_name], leaf, tensor, dtype)
    leftovers = [key for key in merged if "lora_" in key or ".base_layer." in key]
    if leftovers:
        raise ValueError(f"merged weights still hold adapter names: {leftovers[:3]}")
    return merged


def _merged(layer: LoraLayer, leaf: str, tensor: torch.Tensor, dtype: torch.dtype | None) -> torch.Tensor:
    """One base tensor of a LoRA layer: the weight plus the adapter's delta (then cast), the bias as it is."""
    if leaf != "weight" or ADAPTER not in layer.lora_A:
        return tensor
    # every concrete LoRA layer (Linear, Embedding, ...) defines get_delta_weight; their base class does not declare it
    tensor = tensor + layer.get_delta_weight(ADAPTER).to(tensor.dtype)  # type: ignore[attr-defined]
    return tensor if dtype is None else tensor.to(dtype)


def _owning_layer(key: str, layers: dict[str, LoraLayer]) -> tuple[str | None, str]:
    """(the LoRA layer a state-dict key lies in, the rest of the key), or (None, key)."""
    parts = key.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        if (prefix := ".".join(parts[:cut])) in layers:
            return prefix, ".".join(parts[cut:])
    return None, key


def base_fingerprint(model_dir: Path) -> JsonObject:
    """What identifies a base model directory: its config (minus the writer's version and path), the size of each
    weight file and a hash of `_SAMPLES` evenly spaced samples of each file's bytes (header included)."""
    model_dir = Path(model_dir)
    config = json.loads((model_dir / "config.json").read_text())
    for volatile in ("_name_or_path", "transformers_version"):
        config.pop(volatile, None)
    files = sorted(p for p in model_dir.iterdir() if p.suffix in {".safetensors", ".bin"} and p.is_file())
    sampled = hashlib.sha256()
    for path in files:
        size = path.stat().st_size
        with open(path, "rb") as fh:
            for k in range(_SAMPLES):
                fh.seek(max(0, size - _SAMPLE_BYTES) * k // max(_SAMPLES - 1, 1))
                sampled.update(fh.read(_SAMPLE_BYTES))
    return {"config_sha256": hashlib.sha256(json.dumps(config, sort_keys=True).encode()).hexdigest(),
            "weight_files": {p.name: p.stat().st_size for p in files}, "sampled_sha256": sampled.hexdigest()}


def is_adapter_checkpoint(checkpoint: Path) -> bool:
    """Whether a checkpoint holds LoRA adapters (and no full weights)."""
    return (Path(checkpoint) / BASE_RECORD_FILE).is_file()


def save_adapters(model: nn.Module, directory: Path) -> None:
    """Write the adapters as a PEFT adapter directory, plus the base model's directory and fingerprint."""
    from peft import get_peft_model_state_dict
    from safetensors.torch import save_file

    config, directory = hf_model(model).peft_config[ADAPTER], Path(directory)  # set by PEFT's get_peft_model
    config.save_pretrained(directory)
    state = get_peft_model_state_dict(model, adapter_name=ADAPTER)
    save_file({f"base_model.model.{k}": v.detach().contiguous().cpu() for k, v in state.items()},
              directory / ADAPTER_WEIGHTS_FILE, metadata={"format": "pt"})
    if config.base_model_name_or_path is None:  # add_adapters sets it
        raise ValueError("the adapters do not name their base model directory")
    base = Path(config.base_model_name_or_path)
    record = {"base_model_dir": str(base), "fingerprint": base_fingerprint(base)}
    (directory / BASE_RECORD_FILE).write_text(json.dumps(record, indent=2, sort_keys=True) + "\n")


def base_for_restore(checkpoint: Path, settings: LoraSettings, model_dir: Path | None = None) -> Path:
    """The base model directory to put ``checkpoint``'s adapters on: ``model_dir`` when given, else the one the
    checkpoint names. Raises when its fingerprint is not the recorded one, or the settings' LoRA shape differs."""
    record = json.loads((Path(checkpoint) / BASE_RECORD_FILE).read_text())
    saved = json.loads((Path(checkpoint) / ADAPTER_CONFIG_FILE).read_text())
    wanted = {"r": settings.lora_rank, "lora_alpha": settings.lora_alpha,
              "target_modules": sorted(settings.lora_target_modules)}
    found = {"r": saved["r"], "lora_alpha": saved["lora_alpha"], "target_modules": sorted(saved["target_modules"])}
    if settings.lora_rank == 0 or found != wanted:
        raise ValueError(f"{checkpoint} holds LoRA adapters {found}; the settings ask for "
                         f"{wanted if settings.lora_rank else 'full fine-tuning (lora_rank=0)'}: set the lora_* "
                         "settings the run was started with")
    return verified_base(checkpoint, record, Path(model_dir) if model_dir is not None else None)


def verified_base(checkpoint: Path, record: JsonObject, base: Path | None = None) -> Path:
    """``base`` (default: the directory the checkpoint's base record names) once its fingerprint is the recorded one;
    ValueError when it is missing or another model."""
    base = base if base is not None else Path(record["base_model_dir"])
    if not (base / "config.json").is_file():
        raise ValueError(f"{checkpoint} holds LoRA adapters of the base model {record['base_model_dir']}, "
                         f"which is not at {base}")
    if base_fingerprint(base) != record["fingerprint"]:
        raise ValueError(f"{checkpoint} holds LoRA adapters of the base model {record['base_model_dir']}; {base} is "
                         "another model (config or weight files differ): use the run's base model")
    return base


def load_adapters(model: nn.Module, checkpoint: Path) -> None:
    """Put ``checkpoint``'s adapter weights into ``model`` (built by `add_adapters` with the same settings)."""
    from peft import set_peft_model_state_dict
    from safetensors.torch import load_file

    saved = load_file(Path(checkpoint) / ADAPTER_WEIGHTS_FILE)
    state = {k.removeprefix("base_model.model."): v for k, v in saved.items()}
    # torch's load result is a namedtuple made at run time (`_IncompatibleKeys`): mypy cannot see its fields
    missing_keys, unexpected_keys = set_peft_model_state_dict(model, state, adapter_name=ADAPTER)  # type: ignore[attr-defined]
    expected = {n for n, p in model.named_parameters() if p.requires_grad}
    missing = expected & set(missing_keys)
    if unexpected_keys or missing or len(state) != len(expected):
        raise ValueError(f"{checkpoint}: adapter weights do not fit the model (unexpected "
                         f"{list(unexpected_keys)[:3]}, missing {sorted(missing)[:3]})")


def write_merged_model(checkpoint: Path, out_dir: Path) -> Path:
    """Write ``checkpoint``'s policy as a plain HF model directory in ``out_dir``: the base it names (its fingerprint
    checked) with the adapters merged in, float32, and the base's tokenizer. What `azr eval` loads for an
    adapters-only checkpoint; the adapter settings are read from the checkpoint itself."""
    from peft import PeftModel
    from transformers import AutoModelForCausalLM, AutoTokenizer

    checkpoint = Path(checkpoint)
    base = verified_base(checkpoint, json.loads((checkpoint / BASE_RECORD_FILE).read_text()))
    model = AutoModelForCausalLM.from_pretrained(base, dtype=torch.float32, local_files_only=True)
    with peft_on_transformers5():
        merged = PeftModel.from_pretrained(model, checkpoint).merge_and_unload()
    merged.save_pretrained(out_dir)
    AutoTokenizer.from_pretrained(base, local_files_only=True).save_pretrained(out_dir)
    return Path(out_dir)
