"""log π(token) and the entropy of π straight from the hidden states: the LM head is applied one chunk of tokens at a
time inside one autograd function, so the full [N, V] logits (and their [N, V] gradient) never exist.

Why: with a 152k vocabulary the logits of a micro-batch dominate the trainer's memory (4,096 response tokens: 2.5 GB
of float32 logits plus as much again for their gradient), and they grow with the micro-batch while everything else
the head needs is [N, H] (H = 896 for the 0.5B model, 170x smaller). Here the forward keeps the hidden states it was
given, the head's weight (a parameter, kept anyway) and one log-sum-exp per token; the backward rebuilds each chunk's
logits with one more GEMM and turns them into the chunk's share of ∂/∂hidden, ∂/∂W and ∂/∂b at once. Memory beyond
the inputs: a few [chunk, V] float32 buffers, whatever the micro-batch. Cost: one extra head GEMM (4 instead of 3).

Why not a maintained one: torch 2.13's `torch.nn.functional.linear_cross_entropy` (the one installed) chunks the
same way but returns only the cross-entropy, −log p(target); the PPO loss also needs the entropy bonus and its
gradient over the same distribution, which it cannot give (a second pass would rebuild every chunk's logits again).
veRL's `linear_cross_entropy` (log-probs and entropy in one kernel) is a Triton CUDA kernel inside veRL, and TRL's
chunked log-prob is tied to its trainers; neither is installed nor runs on CPU. The math per chunk is shared with
`trainer_svc.token_logprobs` (tested against plain autograd and float64 gradcheck, as this one is).

Precision: the chunk's logits are computed in the autocast dtype when autocast is on (bf16 on CUDA or a CPU, as the
plain `lm_head(hidden)` was), then everything softmax-related in float32; the backward rebuilds the logits under the
autocast state the forward ran in, read from the inputs' device type (torch's `custom_fwd/custom_bwd` take one fixed
device type: with "cuda" a CPU backward rebuilt float32 logits against a bf16 log-sum-exp, 6.6% off plain autograd on
a toy head), and each gradient comes back in its input's dtype.
"""

from __future__ import annotations

from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from typing import Protocol

import torch
from torch.nn import functional as F

from trainer_svc.token_logprobs import chunk_forward, chunk_grad, compute_dtype

DEFAULT_CHUNK_TOKENS = 512
"""Tokens whose logits exist at once (settings.logprob_chunk_tokens overrides it)."""


def _spans(rows: int, chunk_tokens: int) -> list[tuple[int, int]]:
    """(start, stop) row ranges of at most ``chunk_tokens`` rows each."""
    return [(start, min(rows, start + chunk_tokens)) for start in range(0, rows, chunk_tokens)]


class _Context(Protocol):
    """What forward keeps on torch's autograd context for backward: the saved tensors (the bias may be None), which
    inputs want gradients, the autocast state and the call's options."""

    saved_tensors: tuple[torch.Tensor, ...]
    needs_input_grad: tuple[bool, ...]
    autocast: AutocastState
    temperature: float
    with_entropy: bool
    chunk_tokens: int

    def save_for_backward(self, *tensors: torch.Tensor | None) -> None: ...


class _HeadLogprobEntropy(torch.autograd.Function):
    """hidden [N, H], head weight [V, H] (+ bias [V]), ids [N] -> (log p(ids) [N], entropy [N]) in float32 (float64
    for float64 inputs), logits built per chunk of ``chunk_tokens`` rows."""

    @staticmethod
    def forward(ctx: _Context, hidden: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, ids: torch.Tensor,
                temperature: float, with_entropy: bool, chunk_tokens: int) -> tuple[torch.Tensor, torch.Tensor]:
        rows = hidden.shape[0]
        dtype = compute_dtype(weight.dtype)
        logprobs = torch.empty(rows, dtype=dtype, device=hidden.device)
        entropy = torch.zeros(rows, dtype=dtype, device=hidden.device)
        lse = torch.empty(rows, dtype=dtype, device=hidden.device)
        for start, stop in _spans(rows, chunk_tokens):
            z = F.linear(hidden[start:stop], weight, bias).to(dtype) / temperature
            lse[start:stop], logprobs[start:stop], chunk_entropy = chunk_forward(z, ids[start:stop], with_entropy)
            if chunk_entropy is not None:
                entropy[start:stop] = chunk_entropy
        ctx.save_for_backward(hidden, weight, bias, ids, lse)
        ctx.autocast = AutocastState.now(hidden.device.type)
        ctx.temperature, ctx.with_entropy, ctx.chunk_tokens = temperature, with_entropy, chunk_tokens
        return logprobs, entropy

    @staticmethod
    def backward(ctx: _Context, grad_logprobs: torch.Tensor | None, grad_entropy: torch.Tensor | None
                 ) -> tuple[torch.Tensor | None, torch.Tensor | None, torch.Tensor | None, None, None, None, None]:
        hidden, weight, bias, ids, lse = ctx.saved_tensors
        need_hidden, need_weight, need_bias = ctx.needs_input_grad[:3]
        entropy_grad = grad_entropy if ctx.with_entropy else None
        grad_hidden = torch.empty_like(hidden) if need_hidden else None
        grad_weight = torch.zeros_like(weight, dtype=lse.dtype) if need_weight else None
        grad_bias = torch.zeros_like(bias, dtype=lse.dtype) if need_bias and bias is not None else None
        for start, stop in _spans(hidden.shape[0], ctx.chunk_tokens):
            h = hidden[start:stop]
            with ctx.autocast.context():
                logits = F.linear(h, weight, bias)
            z = logits.to(lse.dtype) / ctx.temperature
            g = chunk_grad(z, lse[start:stop], ids[start:stop],
                           None if grad_logprobs is None else grad_logprobs[start:stop],
                           None if entropy_grad is None else entropy_grad[start:stop]) / ctx.temperature
            g = g.to(logits.dtype)  # ∂loss/∂logits of the chunk, in the dtype the head computed them in
            if grad_hidden is not None:
                grad_hidden[start:stop] = (g @ weight.to(g.dtype)).to(hidden.dtype)
            if grad_weight is not None:
                grad_weight += (g.t() @ h.to(g.dtype)).to(grad_weight.dtype)
            if grad_bias is not None:
                grad_bias += g.sum(dim=0).to(grad_bias.dtype)
        return (grad_hidden, None if grad_weight is None else grad_weight.to(weight.dtype),
                None if grad_bias is None else grad_bias.to(bias.dtype), None, None, None, None)


@dataclass(frozen=True)
class AutocastState:
    """Whether autocast was on for one device type, and its dtype: the forward's, re-entered by the backward."""

    device_type: str
    dtype: torch.dtype | None  # None: autocast off

    @classmethod
    def now(cls, device_type: str) -> AutocastState:
        on = torch.is_autocast_enabled(device_type)
        return cls(device_type, torch.get_autocast_dtype(device_type) if on else None)

    def context(self) -> AbstractContextManager[object]:
        if self.dtype is None:
            return nullcontext()
        return torch.autocast(device_type=self.device_type, dtype=self.dtype)


def head_logprobs_and_entropy(hidden: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None,
                              ids: torch.Tensor, *, temperature: float = 1.0, with_entropy: bool = True,
                              chunk_tokens: int = DEFAULT_CHUNK_TOKENS
                              ) -> tuple[torch.Tensor, torch.Tensor | None]:
    """(log softmax(head(hidden) / T) at ``ids`` [...], its entropy [...] or None), float32 (float64 inputs: float64).

    hidden: [..., H]; weight: [V, H] (the LM head's, tied to the embeddings or not); bias: [V] or None; ids: [...]
    int64. Same values and gradients (for hidden, weight and bias) as `lm_head(hidden)` followed by the float32
    log-softmax expression (tested), with O(chunk_tokens × V) memory instead of O(N × V).
    """
    if temperature <= 0:
        raise ValueError(f"temperature must be > 0, got {temperature}")
    if chunk_tokens < 1:
        raise ValueError(f"chunk_tokens must be >= 1, got {chunk_tokens}")
    shape = ids.shape
    flat_hidden = hidden.reshape(-1, hidden.shape[-1])
    logprobs, entropy = _HeadLogprobEntropy.apply(flat_hidden, weight, bias, ids.reshape(-1), float(temperature),
                                                  with_entropy, int(chunk_tokens))
    return logprobs.reshape(shape), entropy.reshape(shape) if with_entropy else None
