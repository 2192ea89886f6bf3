"""Model FLOPs utilisation (MFU) of a training step: the FLOPs the model's maths needs, over the device's peak.

Counting follows the PaLM paper (Chowdhery et al. 2022, App. B): per token, a forward pass costs 2 FLOPs per weight
of every matrix multiply (embeddings' lookups excluded) plus 2·2·n_layers·d·T for the attention scores and values
over a T-token sequence; forward + backward is 3× the forward. One difference for RL updates: the LM head is needed
only at response positions (the loss is on response tokens), so its weights count for those tokens alone.
Recomputation (activation checkpointing, the behaviour-logprob forward) is not counted: that would be hardware FLOPs
utilisation, not MFU.
"""

from __future__ import annotations

import torch
from torch import nn

PEAK_BF16_TFLOPS = {"H100 PCIe": 756.0, "H100": 989.0, "H200": 989.0, "H20": 148.0, "A100": 312.0, "A10G": 125.0,
                    "L40S": 362.0, "L4": 121.0}
"""Dense bf16 tensor-core peaks from the vendors' data sheets (SXM parts; no sparsity), by device-name substring."""


def matmul_weights(model: nn.Module) -> int:
    """Parameters of every nn.Linear (LM head included); embeddings and norms do no matrix multiply per token."""
    return sum(m.weight.numel() for m in model.modules() if isinstance(m, nn.Linear))


def head_weights(model: nn.Module) -> int:
    """Parameters of the LM head (the output embedding), 0 when the model has none."""
    head = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
    return head.weight.numel() if head is not None else 0


def update_flops(model: nn.Module, lengths: list[tuple[int, int]]) -> float:
    """Forward+backward FLOPs of one pass over sequences of (prompt, response) lengths:
    Σ_seq [6·W_body·T + 6·W_head·R + 12·n_layers·d_model·T²] with T = prompt + response, R = response."""
    config = model.config
    body, head = matmul_weights(model) - head_weights(model), head_weights(model)
    attention = 12.0 * config.num_hidden_layers * config.hidden_size
    return sum(6.0 * body * (p + r) + 6.0 * head * r + attention * (p + r) ** 2 for p, r in lengths)


def peak_tflops(device: torch.device, override: float | None = None) -> float | None:
    """The device's dense bf16 peak in TFLOP/s: ``override`` if given, else looked up by CUDA device name; None on
    CPU or an unknown GPU (no MFU is printed then)."""
    if override is not None:
        return override
    if device.type != "cuda":
        return None
    return peak_for_name(torch.cuda.get_device_name(device))


def peak_for_name(name: str) -> float | None:
    """The table's peak for a CUDA device name, the longest matching key first ("H100 PCIe" before "H100")."""
    for key in sorted(PEAK_BF16_TFLOPS, key=len, reverse=True):
        if key in name:
            return PEAK_BF16_TFLOPS[key]
    return None


def mfu(flops: float, seconds: float, peak: float | None) -> float | None:
    """Achieved model FLOP/s over the peak (a fraction), or None without a known peak."""
    if peak is None or seconds <= 0:
        return None
    return flops / seconds / (peak * 1e12)
