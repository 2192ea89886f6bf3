"""The chunked log-prob/entropy function against the plain float32 autograd expression: values, gradients (both
outputs, either alone, with temperature), chunk boundaries, bf16 logits, and float64 gradcheck."""

from __future__ import annotations

import pytest
import torch

from trainer_svc import token_logprobs
from trainer_svc.token_logprobs import token_logprobs_and_entropy


def reference(logits: torch.Tensor, ids: torch.Tensor, temperature: float = 1.0) -> tuple[torch.Tensor, torch.Tensor]:
    """The expression the trainer used before: log_softmax in float32, gathered; H = −Σ p log p."""
    logp_all = torch.log_softmax(logits.float() / temperature, dim=-1)
    return logp_all.gather(-1, ids.unsqueeze(-1)).squeeze(-1), -(logp_all.exp() * logp_all).sum(-1)


def sample(shape: tuple[int, ...] = (3, 7), vocab: int = 50, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    logits = (3 * torch.randn(*shape, vocab, generator=g)).requires_grad_()
    return logits, torch.randint(0, vocab, shape, generator=g)


def grads_of(fn, logits: torch.Tensor, ids: torch.Tensor, w_lp: torch.Tensor | None, w_h: torch.Tensor | None,
             temperature: float) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    x = logits.detach().clone().requires_grad_()
    lp, h = fn(x, ids, temperature)
    loss = (0 if w_lp is None else (w_lp * lp).sum()) + (0 if w_h is None else (w_h * h).sum())
    loss.backward()
    return lp.detach(), h.detach(), x.grad


def chunked(x: torch.Tensor, ids: torch.Tensor, temperature: float) -> tuple[torch.Tensor, torch.Tensor]:
    lp, h = token_logprobs_and_entropy(x, ids, temperature=temperature)
    assert h is not None
    return lp, h


@pytest.mark.parametrize("temperature", [1.0, 0.7])
@pytest.mark.parametrize("which", ["both", "logprobs", "entropy"])
def test_values_and_gradients_match_the_float32_expression(temperature: float, which: str) -> None:
    logits, ids = sample()
    g = torch.Generator().manual_seed(1)
    w_lp = torch.randn(ids.shape, generator=g) if which in ("both", "logprobs") else None
    w_h = torch.randn(ids.shape, generator=g) if which in ("both", "entropy") else None
    expected = grads_of(reference, logits, ids, w_lp, w_h, temperature)
    actual = grads_of(chunked, logits, ids, w_lp, w_h, temperature)
    for a, e, name in zip(actual, expected, ("logprobs", "entropy", "gradient"), strict=True):
        torch.testing.assert_close(a, e, atol=2e-5, rtol=1e-4, msg=f"{name} differs")
    assert actual[2].abs().max() > 1e-3  # the comparison is not between two zero tensors


def test_chunk_boundaries_do_not_change_anything(monkeypatch: pytest.MonkeyPatch) -> None:
    logits, ids = sample((5, 3), vocab=40)
    w = torch.randn(ids.shape, generator=torch.Generator().manual_seed(2))
    whole = grads_of(chunked, logits, ids, w, w, 1.0)
    monkeypatch.setattr(token_logprobs, "ROW_CHUNK_ELEMENTS", 40 * 2)  # 2 rows a chunk, 15 rows: uneven last chunk
    assert len(token_logprobs._chunks(15, 40)) == 8
    split = grads_of(chunked, logits, ids, w, w, 1.0)
    for a, b in zip(split, whole, strict=True):
        torch.testing.assert_close(a, b, atol=1e-6, rtol=0)


def test_bf16_logits_give_float32_outputs_and_a_bf16_gradient() -> None:
    logits, ids = sample()
    low = logits.detach().to(torch.bfloat16)
    w = torch.randn(ids.shape, generator=torch.Generator().manual_seed(3))
    lp, h, grad = grads_of(chunked, low, ids, w, w, 1.0)
    ref_lp, ref_h, ref_grad = grads_of(reference, low, ids, w, w, 1.0)  # the reference upcasts the same bf16 values
    assert lp.dtype == h.dtype == torch.float32 and grad.dtype == torch.bfloat16
    torch.testing.assert_close(lp, ref_lp, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(h, ref_h, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(grad.float(), ref_grad.float(), atol=1e-2, rtol=1e-2)


def test_gradcheck_in_float64() -> None:
    logits, ids = sample((2, 3), vocab=11)
    x = logits.detach().double().requires_grad_()
    w = torch.randn(ids.shape, dtype=torch.float64, generator=torch.Generator().manual_seed(4))

    def combined(inp: torch.Tensor) -> torch.Tensor:
        lp, h = token_logprobs_and_entropy(inp, ids, temperature=0.8)
        return (w * lp).sum() + (w.flip(0) * h).sum()

    assert torch.autograd.gradcheck(combined, (x,), eps=1e-6, atol=1e-5)


def test_without_entropy_returns_none_and_temperature_must_be_positive() -> None:
    logits, ids = sample()
    lp, h = token_logprobs_and_entropy(logits, ids, with_entropy=False)
    assert h is None and lp.shape == ids.shape
    with pytest.raises(ValueError, match="temperature must be > 0"):
        token_logprobs_and_entropy(logits, ids, temperature=0.0)
