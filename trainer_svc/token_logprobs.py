"""log π(token) and the entropy of π from LM-head logits, in row chunks, with a hand-written backward.

The plain autograd expression (`logits.float()` → `log_softmax` → `exp` → `·` → `sum`) keeps four float32 [N, V]
tensors alive for the backward and makes about ten passes over them; with a 152k vocabulary that is 2.4 GB per
4,096 response tokens and, measured on an H100 (docs/benchmarks.md), most of the gap between a TRR++ update and a plain
cross-entropy step. Here only the logits and one log-sum-exp per row are saved; the softmax is rebuilt one chunk of
rows at a time in float32, in the forward and in the backward.

The trainer itself no longer materialises the logits: `trainer_svc.head_logprobs` applies the LM head per chunk of
hidden states and reuses the per-chunk math below (`chunk_forward`, `chunk_grad`). This logits-level function stays
as the reference the head-level one is tested against, and for callers that already hold logits.

Gradients, with z = logits / T, p = softmax(z), E = Σ_v p_v z_v, H = logsumexp(z) − E:
    ∂ log p_t / ∂z = onehot(t) − p          ∂H / ∂z = −p ⊙ (z − E)          ∂/∂logits = (∂/∂z) / T
"""

from __future__ import annotations

from typing import Protocol

import torch

ROW_CHUNK_ELEMENTS = 1 << 24
"""Float32 elements of one chunk's [rows, V] working tensor (64 MiB): bounded memory whatever the micro-batch."""


def _chunks(rows: int, vocab: int) -> list[tuple[int, int]]:
    """(start, stop) row ranges of at most ROW_CHUNK_ELEMENTS elements each (at least one row)."""
    step = max(1, ROW_CHUNK_ELEMENTS // max(vocab, 1))
    return [(start, min(rows, start + step)) for start in range(0, rows, step)]


def compute_dtype(dtype: torch.dtype) -> torch.dtype:
    """float32 for half-precision and float32 inputs, float64 for float64 (gradcheck)."""
    return torch.promote_types(dtype, torch.float32)


def chunk_forward(z: torch.Tensor, ids: torch.Tensor, with_entropy: bool
                  ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """(log-sum-exp [c], log p(ids) [c], entropy [c] or None) of one chunk of tempered logits z [c, V]."""
    lse = torch.logsumexp(z, dim=-1)
    logprobs = z.gather(-1, ids.unsqueeze(-1)).squeeze(-1) - lse
    entropy = None
    if with_entropy:
        p = torch.exp(z - lse.unsqueeze(-1))
        entropy = lse - (p * z).sum(dim=-1)
    return lse, logprobs, entropy


def chunk_grad(z: torch.Tensor, lse: torch.Tensor, ids: torch.Tensor, grad_logprobs: torch.Tensor | None,
               grad_entropy: torch.Tensor | None) -> torch.Tensor:
    """∂loss/∂z [c, V] of one chunk from the upstream gradients of its log-probs and entropies (either may be None:
    the graph may use only one of the two outputs)."""
    p = torch.exp(z - lse.unsqueeze(-1))
    g = torch.zeros_like(z)
    if grad_logprobs is not None:
        g_lp = grad_logprobs.to(z.dtype).unsqueeze(-1)
        g = -g_lp * p
        g.scatter_add_(-1, ids.unsqueeze(-1), g_lp)
    if grad_entropy is not None:
        expected = (p * z).sum(dim=-1, keepdim=True)
        g -= grad_entropy.to(z.dtype).unsqueeze(-1) * p * (z - expected)
    return g


class _Context(Protocol):
    """What forward keeps on torch's autograd context for backward: the saved tensors and the call's options."""

    saved_tensors: tuple[torch.Tensor, ...]
    temperature: float
    with_entropy: bool

    def save_for_backward(self, *tensors: torch.Tensor) -> None: ...


class _TokenLogprobEntropy(torch.autograd.Function):
    """Rows of logits [N, V] and target ids [N] -> (log p(target) [N], entropy [N]), float32 (float64 inputs:
    float64)."""

    @staticmethod
    def forward(ctx: _Context, logits: torch.Tensor, ids: torch.Tensor, temperature: float, with_entropy: bool
                ) -> tuple[torch.Tensor, torch.Tensor]:
        rows, vocab = logits.shape
        dtype = compute_dtype(logits.dtype)
        logprobs = torch.empty(rows, dtype=dtype, device=logits.device)
        entropy = torch.zeros(rows, dtype=dtype, device=logits.device)
        lse = torch.empty(rows, dtype=dtype, device=logits.device)
        for start, stop in _chunks(rows, vocab):
            z = logits[start:stop].to(dtype) / temperature
            lse[start:stop], logprobs[start:stop], chunk_entropy = chunk_forward(z, ids[start:stop], with_entropy)
            if chunk_entropy is not None:
                entropy[start:stop] = chunk_entropy
        ctx.save_for_backward(logits, ids, lse)
        ctx.temperature, ctx.with_entropy = temperature, with_entropy
        return logprobs, entropy

    @staticmethod
    def backward(ctx: _Context, grad_logprobs: torch.Tensor | None, grad_entropy: torch.Tensor | None
                 ) -> tuple[torch.Tensor, None, None, None]:
        logits, ids, lse = ctx.saved_tensors
        rows, vocab = logits.shape
        temperature = ctx.temperature
        entropy_grad = grad_entropy if ctx.with_entropy else None
        grad = torch.empty_like(logits)
        for start, stop in _chunks(rows, vocab):
            z = logits[start:stop].to(lse.dtype) / temperature
            g = chunk_grad(z, lse[start:stop], ids[start:stop],
                           None if grad_logprobs is None else grad_logprobs[start:stop],
                           None if entropy_grad is None else entropy_grad[start:stop])
            grad[start:stop] = (g / temperature).to(grad.dtype)
        return grad, None, None, None


def token_logprobs_and_entropy(logits: torch.Tensor, ids: torch.Tensor, *, temperature: float = 1.0,
                               with_entropy: bool = True) -> tuple[torch.Tensor, torch.Tensor | None]:
    """(log softmax(logits / T) at ``ids`` [...], entropy of softmax(logits / T) [...] or None), both float32
    (float64 for float64 logits).

    logits: [..., V] in any float dtype (bf16 under autocast); ids: [...] int64. The same values and gradients as
    the float32 autograd expression (tested), with O(chunk) extra memory instead of four [..., V] tensors.
    """
    if temperature <= 0:
        raise ValueError(f"temperature must be > 0, got {temperature}")
    shape, vocab = ids.shape, logits.shape[-1]
    flat_logits = logits.reshape(-1, vocab)
    logprobs, entropy = _TokenLogprobEntropy.apply(flat_logits, ids.reshape(-1), float(temperature), with_entropy)
    return logprobs.reshape(shape), entropy.reshape(shape) if with_entropy else None
