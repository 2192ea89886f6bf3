"""The LM head applied per chunk inside the log-prob/entropy function, against the path it replaced (full logits from
`lm_head(hidden)`, then the log-softmax): values and the gradients of hidden states, head weight and bias, with
temperature, uneven chunks and either output alone; float64 gradcheck; and the trainer's whole forward on the tiny
model, parameter gradients included."""

from __future__ import annotations

from contextlib import nullcontext
from pathlib import Path

import pytest
import torch
from trainer_episodes import six_group_batch

from services.settings import Settings
from trainer_svc.batching import collate
from trainer_svc.head_logprobs import head_logprobs_and_entropy
from trainer_svc.policy_forward import logprobs_and_entropy, response_logits
from trainer_svc.resume import fresh_trainer
from trainer_svc.token_logprobs import token_logprobs_and_entropy

pytestmark = pytest.mark.precision  # CI runs these again with AZR_CPU_NATIVE_BF16=1


def inputs(rows: int = 3, positions: int = 7, hidden: int = 6, vocab: int = 40, *, bias: bool = True,
           dtype: torch.dtype = torch.float32, seed: int = 0) -> tuple[torch.Tensor, ...]:
    g = torch.Generator().manual_seed(seed)
    h = torch.randn(rows, positions, hidden, generator=g, dtype=dtype)
    w = torch.randn(vocab, hidden, generator=g, dtype=dtype)
    b = torch.randn(vocab, generator=g, dtype=dtype) if bias else None
    ids = torch.randint(0, vocab, (rows, positions), generator=g)
    return h, w, b, ids


def old_path(h: torch.Tensor, w: torch.Tensor, b: torch.Tensor | None, ids: torch.Tensor, temperature: float
             ) -> tuple[torch.Tensor, torch.Tensor]:
    """What the trainer did before: the whole [.., V] logits, then the float32 log-softmax expression."""
    logits = torch.nn.functional.linear(h, w, b)
    logp = torch.log_softmax(logits.float() / temperature, dim=-1)
    return logp.gather(-1, ids.unsqueeze(-1)).squeeze(-1), -(logp.exp() * logp).sum(-1)


def run(fn, h, w, b, ids, w_lp, w_h, forward_context=None):
    """Values and gradients of a weighted sum of the outputs; the forward runs in ``forward_context`` (an autocast),
    the backward outside it, as the trainer runs them."""
    leaves = [t.detach().clone().requires_grad_() if t is not None else None for t in (h, w, b)]
    with forward_context or nullcontext():
        lp, ent = fn(*leaves, ids)
        loss = (0 if w_lp is None else (w_lp * lp).sum()) + (0 if w_h is None else (w_h * ent).sum())
    loss.backward()
    return [lp.detach(), ent.detach()] + [t.grad if t is not None else None for t in leaves]


@pytest.mark.parametrize("temperature", [1.0, 0.7])
@pytest.mark.parametrize("which", ["both", "logprobs", "entropy"])
@pytest.mark.parametrize("chunk_tokens", [1, 4, 64])
def test_values_and_gradients_equal_the_full_logits_path(temperature: float, which: str, chunk_tokens: int) -> None:
    h, w, b, ids = inputs()
    g = torch.Generator().manual_seed(1)
    w_lp = torch.randn(ids.shape, generator=g) if which != "entropy" else None
    w_h = torch.randn(ids.shape, generator=g) if which != "logprobs" else None
    expected = run(lambda *a: old_path(*a, temperature), h, w, b, ids, w_lp, w_h)
    actual = run(lambda hh, ww, bb, ii: head_logprobs_and_entropy(hh, ww, bb, ii, temperature=temperature,
                                                                  chunk_tokens=chunk_tokens), h, w, b, ids, w_lp, w_h)
    for name, a, e in zip(("logprobs", "entropy", "d hidden", "d weight", "d bias"), actual, expected, strict=True):
        torch.testing.assert_close(a, e, atol=3e-5, rtol=1e-4, msg=f"{name} differs")
    assert actual[3].abs().max() > 1e-3  # not two zero tensors


def test_without_bias_and_without_entropy() -> None:
    h, w, _, ids = inputs(bias=False)
    lp, ent = head_logprobs_and_entropy(h, w, None, ids, with_entropy=False, chunk_tokens=5)
    assert ent is None
    torch.testing.assert_close(lp, old_path(h, w, None, ids, 1.0)[0], atol=1e-5, rtol=1e-5)
    with pytest.raises(ValueError, match="temperature"):
        head_logprobs_and_entropy(h, w, None, ids, temperature=0.0)
    with pytest.raises(ValueError, match="chunk_tokens"):
        head_logprobs_and_entropy(h, w, None, ids, chunk_tokens=0)


def test_gradcheck_in_float64() -> None:
    h, w, b, ids = inputs(2, 3, 4, 9, dtype=torch.float64)
    weights = torch.randn(ids.shape, dtype=torch.float64, generator=torch.Generator().manual_seed(5))

    def combined(hh: torch.Tensor, ww: torch.Tensor, bb: torch.Tensor) -> torch.Tensor:
        lp, ent = head_logprobs_and_entropy(hh, ww, bb, ids, temperature=0.8, chunk_tokens=4)
        return (weights * lp).sum() + (weights.flip(0) * ent).sum()

    leaves = tuple(t.requires_grad_() for t in (h, w, b))
    assert torch.autograd.gradcheck(combined, leaves, eps=1e-6, atol=1e-5)


def test_the_trainers_forward_gives_the_old_paths_values_and_parameter_gradients(tiny_dir: Path,
                                                                               cpu_settings: Settings) -> None:
    """The whole policy forward (backbone, response positions, head): chunked head vs full logits, same gradients
    for every parameter, the tied embedding / LM head included."""
    loaded = fresh_trainer(tiny_dir, cpu_settings.trainer)
    model = loaded.trainer.model
    mb = collate(six_group_batch(loaded.tokenizer, 1), torch.zeros(6), list(range(6)), loaded.trainer.pad_id)
    weights = torch.randn(mb.response_ids.shape, generator=torch.Generator().manual_seed(2)) * mb.response_mask

    def grads(new: bool) -> tuple[torch.Tensor, torch.Tensor, dict[str, torch.Tensor]]:
        model.zero_grad(set_to_none=True)
        if new:
            lp, ent = logprobs_and_entropy(model, mb, temperature=0.9, chunk_tokens=7)
        else:
            lp, ent = token_logprobs_and_entropy(response_logits(model, mb), mb.response_ids, temperature=0.9)
        ((weights * lp).sum() + 0.1 * (weights * ent).sum()).backward()
        return lp.detach(), ent.detach(), {n: p.grad.clone() for n, p in model.named_parameters()}

    old_lp, old_ent, old_grads = grads(new=False)
    new_lp, new_ent, new_grads = grads(new=True)
    torch.testing.assert_close(new_lp, old_lp, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(new_ent, old_ent, atol=1e-5, rtol=1e-5)
    assert old_grads.keys() == new_grads.keys()
    for name, grad in old_grads.items():
        torch.testing.assert_close(new_grads[name], grad, atol=1e-6, rtol=1e-4, msg=name)


def relative_error(actual: torch.Tensor, expected: torch.Tensor) -> float:
    return float((actual.float() - expected.float()).norm() / expected.float().norm())


@pytest.mark.parametrize("which", ["both", "logprobs"])
def test_cpu_bf16_autocast_gradients_equal_plain_autograd_under_the_same_autocast(which: str) -> None:
    """On a CPU under bf16 autocast the backward must rebuild the logits in bf16, as the forward computed them: a
    vocabulary-sized head (V = 32,000, logits ~14 as a trained model's), chunked, against plain autograd through
    `lm_head(hidden)` under the same autocast. Rebuilding them in float32 (a backward that ignored the CPU's
    autocast) put the hidden-state gradient 6.6% off on a toy head; bf16 rounding alone is ~1%."""
    rows, hidden, vocab = 64, 64, 32_000
    g = torch.Generator().manual_seed(3)
    h = torch.randn(rows, hidden, generator=g)
    w = torch.randn(vocab, hidden, generator=g) * (14.0 / hidden ** 0.5)
    ids = torch.randint(0, vocab, (rows,), generator=g)
    w_lp = torch.randn(rows, generator=g)
    w_h = torch.randn(rows, generator=g) if which == "both" else None
    bf16 = lambda: torch.autocast(device_type="cpu", dtype=torch.bfloat16)  # noqa: E731
    expected = run(lambda *a: old_path(*a, 1.0), h, w, None, ids, w_lp, w_h, bf16())
    actual = run(lambda hh, ww, bb, ii: head_logprobs_and_entropy(hh, ww, bb, ii, chunk_tokens=16),
                 h, w, None, ids, w_lp, w_h, bf16())
    for name, position in (("d hidden", 2), ("d weight", 3)):
        error = relative_error(actual[position], expected[position])
        assert error < 0.02, f"{name}: {error:.2%} off plain autograd under the same autocast"
    assert relative_error(actual[0], expected[0]) < 0.01  # log-probs


def test_the_backward_reenters_the_forwards_autocast_only() -> None:
    """Outside autocast the chunked function stays float32-exact; inside, the backward's logits are bf16."""
    h, w, b, ids = inputs()
    plain = run(lambda hh, ww, bb, ii: head_logprobs_and_entropy(hh, ww, bb, ii), h, w, b, ids,
                torch.ones(ids.shape), None)
    expected = run(lambda *a: old_path(*a, 1.0), h, w, b, ids, torch.ones(ids.shape), None)
    torch.testing.assert_close(plain[2], expected[2], atol=3e-5, rtol=1e-4)
