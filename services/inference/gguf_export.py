"""GGUF files for the llama.cpp engine, written with the `gguf` package: LoRA adapters and whole models.

- `write_lora_gguf`: a PEFT adapter directory (what the trainer pushes with LoRA: `adapter_config.json` +
  `adapter_model.safetensors`) as a llama.cpp LoRA adapter (`general.type = adapter`, `adapter.lora.alpha`, tensors
  `<base tensor>.lora_a` [r, in] and `.lora_b` [out, r] in float32). llama.cpp scales B·A by alpha / r, PEFT's
  scaling, so the adapter is applied at scale 1.
- `write_model_gguf`: a transformers causal LM directory (Qwen2 or Llama family) as a float GGUF with its tokenizer,
  for models without a GGUF release (the tiny test model, a full fine-tuning push).

Llama-family GGUFs store q/k projections with their rows permuted for llama.cpp's rotary embedding
(convert_hf_to_gguf's `LlamaModel.permute`); the same permutation is applied to those weights and to the rows of
their adapters' B. Qwen2 keeps HF's layout. Other architectures are refused with a clear error.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from services.json_types import JsonObject

if TYPE_CHECKING:
    from gguf import GGUFReader, GGUFWriter, TensorNameMap

SUPPORTED_ARCHITECTURES = {"Qwen2ForCausalLM": "qwen2", "LlamaForCausalLM": "llama"}
"""transformers architecture -> GGUF architecture this module can write."""

PEFT_PREFIX = "base_model.model."


class GgufExportError(ValueError):
    """The model or adapter cannot be written as a GGUF this engine loads."""


def gguf_architecture(model_gguf: Path) -> tuple[str, int]:
    """(general.architecture, block count) of a GGUF model file, read from its header (memory-mapped)."""
    import gguf

    reader = gguf.GGUFReader(str(model_gguf))
    arch = _field_str(reader, "general.architecture")
    blocks = int(reader.fields[f"{arch}.block_count"].contents())
    return arch, blocks


def _field_str(reader: GGUFReader, key: str) -> str:
    field = reader.fields.get(key)
    if field is None:
        raise GgufExportError(f"GGUF has no {key}")
    return str(field.contents())


def _permute_rows(weight: np.ndarray, heads: int) -> np.ndarray:
    """Rows of a q/k projection (or its adapter B) reordered as llama.cpp's Llama GGUFs store them."""
    rows = weight.shape[0]
    return (weight.reshape(heads, 2, rows // heads // 2, *weight.shape[1:])
            .swapaxes(1, 2).reshape(weight.shape))


def _llama_heads(config: JsonObject) -> dict[str, int]:
    heads = int(config["num_attention_heads"])
    return {"q_proj": heads, "k_proj": int(config.get("num_key_value_heads") or heads)}


def _tensor_name(name_map: TensorNameMap, hf_name: str) -> str:
    gguf_name = name_map.get_name(hf_name, try_suffixes=(".weight", ".bias"))
    if gguf_name is None:
        raise GgufExportError(f"no GGUF name for tensor {hf_name}")
    return str(gguf_name)


def write_lora_gguf(adapter_dir: Path, target: Path, *, architecture: str, blocks: int,
                    model_config: JsonObject | None = None) -> Path:
    """Write the PEFT adapter in ``adapter_dir`` as a llama.cpp LoRA GGUF at ``target`` (atomic) for a base model of
    GGUF ``architecture`` with ``blocks`` layers; ``model_config`` (the HF config) is needed for Llama's q/k
    permutation. Refuses adapters PEFT scales otherwise than alpha / r (rsLoRA, rank or alpha patterns, DoRA)."""
    import gguf
    from safetensors.numpy import load_file

    config = json.loads((Path(adapter_dir) / "adapter_config.json").read_text())
    for unsupported in ("use_rslora", "use_dora"):
        if config.get(unsupported):
            raise GgufExportError(f"{unsupported} adapters are not supported by the llama.cpp engine")
    if config.get("rank_pattern") or config.get("alpha_pattern"):
        raise GgufExportError("per-module rank or alpha patterns are not supported by the llama.cpp engine")
    try:
        arch_enum = next(a for a, n in gguf.MODEL_ARCH_NAMES.items() if n == architecture)
    except StopIteration:
        raise GgufExportError(f"unknown GGUF architecture {architecture!r}") from None
    name_map = gguf.get_tensor_name_map(arch_enum, blocks)
    state = load_file(str(Path(adapter_dir) / "adapter_model.safetensors"))
    heads = _llama_heads(model_config or {}) if architecture == "llama" else {}
    if architecture == "llama" and not model_config:
        raise GgufExportError("a Llama adapter needs the model config (q/k permutation)")
    writer_path = target.with_name(f".{target.name}.{os.getpid()}.partial")
    writer = gguf.GGUFWriter(str(writer_path), architecture)
    writer.add_type(gguf.GGUFType.ADAPTER)
    writer.add_string(gguf.Keys.Adapter.TYPE, "lora")
    writer.add_float32(gguf.Keys.Adapter.LORA_ALPHA, float(config["lora_alpha"]))
    added = 0
    for key in sorted(state):
        module, _, part = key.removeprefix(PEFT_PREFIX).rpartition(".lora_")
        if part not in ("A.weight", "B.weight"):
            raise GgufExportError(f"unexpected adapter tensor {key}")
        tensor = state[key].astype(np.float32)
        leaf = module.rsplit(".", 1)[-1]
        if part == "B.weight" and leaf in heads:
            tensor = _permute_rows(tensor, heads[leaf])
        base_name = _tensor_name(name_map, module + ".weight")
        writer.add_tensor(f"{base_name}.lora_{part[0].lower()}", np.ascontiguousarray(tensor))
        added += 1
    if not added:
        raise GgufExportError(f"{adapter_dir} holds no adapter tensors")
    _finish(writer, writer_path, target)
    return target


def write_model_gguf(model_dir: Path, target: Path, *, dtype: str = "f32", tokenizer_dir: Path | None = None
                     ) -> Path:
    """Write the transformers causal LM in ``model_dir`` (safetensors weights; its tokenizer, or the one in
    ``tokenizer_dir``: a trainer's push holds weights only) as a GGUF at ``target`` (atomic); weights in ``dtype``
    (`f32` or `f16`; norms and biases stay f32)."""
    import gguf
    import torch
    from safetensors import safe_open

    model_dir = Path(model_dir)
    config = json.loads((model_dir / "config.json").read_text())
    hf_arch = (config.get("architectures") or ["?"])[0]
    if hf_arch not in SUPPORTED_ARCHITECTURES:
        raise GgufExportError(f"{hf_arch} models cannot be written as GGUF here (supported: "
                              f"{', '.join(SUPPORTED_ARCHITECTURES)})")
    if dtype not in ("f32", "f16"):
        raise GgufExportError(f"unknown GGUF weight dtype {dtype!r} (f32 or f16)")
    architecture = SUPPORTED_ARCHITECTURES[hf_arch]
    arch_enum = next(a for a, n in gguf.MODEL_ARCH_NAMES.items() if n == architecture)
    blocks = int(config["num_hidden_layers"])
    name_map = gguf.get_tensor_name_map(arch_enum, blocks)
    heads = _llama_heads(config) if architecture == "llama" else {}
    writer_path = target.with_name(f".{target.name}.{os.getpid()}.partial")
    writer = gguf.GGUFWriter(str(writer_path), architecture)
    _add_hparams(writer, config)
    _add_tokenizer(writer, Path(tokenizer_dir) if tokenizer_dir is not None else model_dir)
    tensors: dict[str, np.ndarray] = {}
    for file in sorted(model_dir.glob("*.safetensors")):
        with safe_open(str(file), framework="pt") as handle:
            for name in handle.keys():
                tensors[name] = handle.get_tensor(name).to(torch.float32).numpy()
    if not tensors:
        raise GgufExportError(f"no safetensors weights in {model_dir}")
    for name in sorted(tensors):
        if name == "lm_head.weight" and config.get("tie_word_embeddings"):
            continue
        data = tensors[name]
        leaf = name.rsplit(".", 2)[-2] if name.count(".") >= 2 else ""
        if leaf in heads and name.endswith(".weight"):
            data = _permute_rows(data, heads[leaf])
        elif leaf in heads and name.endswith(".bias"):
            data = _permute_rows(data, heads[leaf])
        if dtype == "f16" and data.ndim == 2:
            data = data.astype(np.float16)
        writer.add_tensor(_tensor_name(name_map, name), np.ascontiguousarray(data))
    _finish(writer, writer_path, target)
    return target


def _add_hparams(writer: GGUFWriter, config: JsonObject) -> None:
    heads = int(config["num_attention_heads"])
    writer.add_context_length(int(config.get("max_position_embeddings", 4096)))
    writer.add_embedding_length(int(config["hidden_size"]))
    writer.add_block_count(int(config["num_hidden_layers"]))
    writer.add_feed_forward_length(int(config["intermediate_size"]))
    writer.add_head_count(heads)
    writer.add_head_count_kv(int(config.get("num_key_value_heads") or heads))
    writer.add_rope_freq_base(float(config.get("rope_theta", 10000.0)))
    writer.add_layer_norm_rms_eps(float(config.get("rms_norm_eps", 1e-6)))
    writer.add_file_type(0)  # ALL_F32 (the f16 variant stores 2-D weights in f16: llama.cpp reads each tensor's type)


def _add_tokenizer(writer: GGUFWriter, model_dir: Path) -> None:
    """The byte-level BPE vocabulary llama.cpp loads with the model. The engine tokenizes and detokenizes with the
    transformers tokenizer itself; llama.cpp only needs a vocabulary of the model's size to load."""
    import gguf
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(model_dir), local_files_only=True)
    backend = json.loads(tokenizer.backend_tokenizer.to_str())
    model = backend["model"]
    if model.get("type") != "BPE":
        raise GgufExportError(f"only byte-level BPE tokenizers can be written as GGUF (this one: {model.get('type')})")
    vocab: dict[str, int] = dict(model["vocab"])
    for added in backend.get("added_tokens", []):
        vocab[added["content"]] = int(added["id"])
    config = json.loads((model_dir / "config.json").read_text())
    size = max(int(config["vocab_size"]), max(vocab.values()) + 1)
    if not model.get("merges"):
        raise GgufExportError(f"the tokenizer in {model_dir} has no BPE merges")
    special = {added["id"] for added in backend.get("added_tokens", []) if added.get("special")}
    tokens = [f"[PAD{i}]" for i in range(size)]
    types = [gguf.TokenType.UNUSED] * size
    for text, index in vocab.items():
        tokens[index] = text
        types[index] = gguf.TokenType.CONTROL if index in special else gguf.TokenType.NORMAL
    merges = [" ".join(m) if isinstance(m, list) else m for m in model.get("merges", [])]
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("qwen2" if config.get("model_type") == "qwen2" else "default")
    writer.add_token_list(tokens)
    writer.add_token_types(types)
    writer.add_token_merges(merges)
    eos = tokenizer.eos_token_id
    if eos is not None:
        writer.add_eos_token_id(int(eos))
    if tokenizer.pad_token_id is not None:
        writer.add_pad_token_id(int(tokenizer.pad_token_id))
    writer.add_add_bos_token(False)


def _finish(writer: GGUFWriter, staging: Path, target: Path) -> None:
    try:
        writer.write_header_to_file()
        writer.write_kv_data_to_file()
        writer.write_tensors_to_file()
        writer.close()
        os.replace(staging, target)
    finally:
        staging.unlink(missing_ok=True)
