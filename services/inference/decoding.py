"""The autoregressive loop for one batch of rows: left padding, KV cache, stop strings, EOS, length, abort.

Kept apart from the engine (which owns the model, the lock and the weight version) so the loop can be read and
tested on its own. Each row is one sample; a prompt sampled n times is n rows.

Output conventions, matching SGLang's `/generate`:
- `output_ids` are every sampled token, including the EOS token or the token that completed a stop string (the
  trainer needs each sampled token with its logprob); nothing after the stop is generated.
- `text` is the decoded output with special tokens dropped, cut before the first stop string (SGLang's default
  `no_stop_trim=false`).
"""

from __future__ import annotations

import inspect
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal

import torch

from services.inference.prefill import KvCache, PrefilledBatch, PrefillProgress, prefill_batch
from services.inference.sampling import choose_tokens

FinishReason = Literal["stop", "length", "abort"]


@dataclass
class RowSpec:
    """How to sample: the subset of `SamplingParams` the loop needs (one value for the whole batch)."""

    max_new_tokens: int
    temperature: float
    top_p: float
    top_k: int
    stop: Sequence[str] = ()


@dataclass(frozen=True)
class DecodeProgress:
    """Where one decoding batch stands, reported after each step (for a live progress display)."""

    step: int  # tokens decoded so far per live row (1 after the first step; 0 while the prompts are prefilled)
    max_new_tokens: int
    rows: int  # rows in the batch at the start (while prefilling: the prompts)
    live: int  # rows still decoding
    tokens: int  # tokens sampled so far, all rows together
    prefilled: int = 0  # prompt positions computed so far (step 0 only)
    prompt_width: int = 0  # prompt positions to compute in all: a prefix shared with an earlier prompt counts once


@dataclass
class RawSample:
    """One finished (or aborted) row."""

    output_ids: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    text: str = ""
    finish_reason: FinishReason = "length"
    matched: int | str | None = None  # the EOS id or the stop string that ended it


PREFILL_CHUNK_TOKENS = 512
"""Prompt positions one prefill forward takes when someone watches (services.inference.prefill computes each
prompt on its own): on a CPU a 0.5B model prefills ~50 tokens/s per thread, so a step's proposer prompts in whole
forwards would be minutes without a sign of life; in chunks, each reported, they take the same time with a progress
line every few seconds. Unwatched, each prompt's unshared part is one forward."""


def cache_keyword(model: torch.nn.Module) -> str:
    """The keyword this transformers version's causal LM takes its KV cache by: `cache` (transformers 5.x renamed
    `past_key_values`, which now prints a deprecation warning and goes in 5.40) or, on older versions,
    `past_key_values`. Read from the forward's signature, not guessed from a version number: a model that takes
    neither name would drop an unknown keyword into its `**kwargs` and silently decode without its cache."""
    parameters = inspect.signature(model.forward).parameters
    for keyword in ("cache", "past_key_values"):
        if keyword in parameters:
            return keyword
    raise TypeError(f"{type(model).__name__}.forward takes its KV cache neither as `cache` nor as `past_key_values`")


def _forward(model: torch.nn.Module, keyword: str, past: KvCache | None, **inputs: torch.Tensor
             ) -> tuple[KvCache, torch.Tensor]:
    """(KV cache after, last-position logits [batch, V]) of one forward pass over `inputs`, on top of `past`."""
    cached = {keyword: past} if past is not None else {}
    out = model(**inputs, **cached, use_cache=True, logits_to_keep=1)
    return out[keyword], out.logits[:, -1, :]


def first_stop(text: str, stops: Sequence[str]) -> tuple[int, str] | None:
    """Earliest occurrence of any stop string in `text`: (index, stop), or None."""
    hits = [(text.find(stop), stop) for stop in stops if stop and stop in text]
    return min(hits) if hits else None


@torch.inference_mode()
def decode_rows(model: torch.nn.Module, prompts: Sequence[Sequence[int]], spec: RowSpec, *, eos_ids: set[int],
                detokenize: Callable[[Sequence[int]], str],
                generator: torch.Generator | None | list[torch.Generator | None],
                abort: threading.Event | None = None, repeats: int = 1,
                on_step: Callable[[DecodeProgress], None] | None = None,
                before_forward: Callable[[], None] | None = None) -> list[RawSample]:
    """Sample `repeats` continuations of each prompt (prompt-major order: prompt 0's samples first).

    Each prompt is prefilled once (a prefix shared with an earlier prompt of the batch only once:
    services.inference.prefill) and its KV cache copied to its `repeats` rows; rows that finish are dropped from
    the batch, so long samples do not pay for short ones. `generator`: one for all rows, or one per sample (in the
    samples' order), so a sample's tokens depend only on its own seed. `abort`, when set, ends every unfinished row at
    the next step with finish_reason `abort` and what it had so far. `on_step` is called after every step,
    `before_forward` before every forward pass, prefill chunks included (the embedded run sets torch's thread count
    there: services/compute/torch_threads.py).
    """
    if not prompts or any(len(p) == 0 for p in prompts):
        raise ValueError("every prompt needs at least one token")
    device = next(model.parameters()).device
    before = before_forward or (lambda: None)
    keyword = cache_keyword(model)
    prefilled = _prefill_repeated(model, keyword, prompts, spec, repeats, before, on_step)
    past, logits, mask, positions = (prefilled.cache, prefilled.last_logits, prefilled.attention_mask,
                                     prefilled.positions)
    samples = [RawSample() for _ in range(len(prompts) * repeats)]
    live, sampled = list(range(len(samples))), 0  # the sample index of each batch row; tokens sampled so far
    step_positions = positions[:, -1:]
    # each step's chosen tokens, fed to the next step (step 0 has its logits already)
    tokens = torch.empty(0, dtype=torch.long, device=device)
    for step in range(spec.max_new_tokens):
        if abort is not None and abort.is_set():
            break
        if step > 0:
            before()
            past, logits = _forward(model, keyword, past, input_ids=tokens.unsqueeze(-1), attention_mask=mask,
                                    position_ids=step_positions)
        row_generator = [generator[i] for i in live] if isinstance(generator, list) else generator
        tokens, logprobs = choose_tokens(logits.float(), spec.temperature, spec.top_p, spec.top_k, row_generator)
        sampled += len(live)
        keep = _append_tokens([samples[i] for i in live], tokens.tolist(), logprobs.tolist(), spec, eos_ids,
                              detokenize)
        if on_step is not None:
            last = step + 1 == spec.max_new_tokens  # rows still going now end at the length limit
            on_step(DecodeProgress(step=step + 1, max_new_tokens=spec.max_new_tokens, rows=len(samples),
                                   live=0 if last else len(keep), tokens=sampled))
        if not keep:
            live = []
            break
        if len(keep) < len(live):  # drop finished rows from the batch and the cache
            index = torch.tensor(keep, device=device)
            past.batch_select_indices(index)
            tokens, mask, step_positions = tokens[index], mask[index], step_positions[index]
            live = [live[row] for row in keep]
        mask = torch.cat([mask, torch.ones((mask.shape[0], 1), dtype=mask.dtype, device=device)], dim=-1)
        step_positions = step_positions + 1
    unfinished: FinishReason = "abort" if abort is not None and abort.is_set() else "length"
    for row in live:
        samples[row].finish_reason = unfinished if len(samples[row].output_ids) < spec.max_new_tokens else "length"
    return with_texts(samples, spec, detokenize)


def _prefill_repeated(model: torch.nn.Module, keyword: str, prompts: Sequence[Sequence[int]], spec: RowSpec,
                      repeats: int, before: Callable[[], None],
                      on_step: Callable[[DecodeProgress], None] | None) -> PrefilledBatch:
    """Every prompt prefilled once, then its cache, logits, mask and positions copied to its ``repeats`` rows."""
    device = next(model.parameters()).device

    def report_prefill(progress: PrefillProgress) -> None:
        assert on_step is not None
        on_step(DecodeProgress(step=0, max_new_tokens=spec.max_new_tokens, rows=len(prompts), live=len(prompts),
                               tokens=0, prefilled=progress.computed, prompt_width=progress.total))

    prefilled = prefill_batch(lambda past, **inputs: _forward(model, keyword, past, **inputs), prompts,
                              chunk_tokens=PREFILL_CHUNK_TOKENS if on_step is not None else 0,
                              before_forward=before, on_progress=report_prefill if on_step is not None else None,
                              cache_config=getattr(model, "config", None), device=device)
    if repeats == 1:
        return prefilled
    prefilled.cache.batch_repeat_interleave(repeats)
    return PrefilledBatch(cache=prefilled.cache, last_logits=prefilled.last_logits.repeat_interleave(repeats, dim=0),
                          attention_mask=prefilled.attention_mask.repeat_interleave(repeats, dim=0),
                          positions=prefilled.positions.repeat_interleave(repeats, dim=0))


def _append_tokens(rows: list[RawSample], tokens: list[int], logprobs: list[float], spec: RowSpec, eos_ids: set[int],
                   detokenize: Callable[[Sequence[int]], str]) -> list[int]:
    """One step's chosen token (and its log-prob) onto each live row; the rows that go on (not stopped by an EOS
    token or a stop string), by position in ``rows``."""
    return [row for row, (sample, token, logprob) in enumerate(zip(rows, tokens, logprobs))
            if not append_token(sample, token, logprob, spec, eos_ids, detokenize)]


def append_token(sample: RawSample, token: int, logprob: float, spec: RowSpec, eos_ids: set[int],
                 detokenize: Callable[[Sequence[int]], str]) -> bool:
    """Add one sampled token (and its log-prob) to ``sample``; True, with its finish reason set, when it stopped it
    (an EOS token, or a stop string now in its text). Both engines' decoding loops call it."""
    sample.output_ids.append(token)
    sample.logprobs.append(logprob)
    if token in eos_ids:
        sample.finish_reason, sample.matched = "stop", token
        return True
    if spec.stop and (hit := first_stop(detokenize(sample.output_ids), spec.stop)) is not None:
        sample.finish_reason, sample.matched = "stop", hit[1]
        return True
    return False


def with_texts(samples: list[RawSample], spec: RowSpec, detokenize: Callable[[Sequence[int]], str]
               ) -> list[RawSample]:
    """Each sample's text: its tokens detokenized, cut before the stop string that ended it (a stop token's text is
    not in the output either way)."""
    for sample in samples:
        text = detokenize(sample.output_ids)
        hit = first_stop(text, spec.stop) if sample.finish_reason == "stop" and isinstance(sample.matched, str) \
            else None
        sample.text = text[:hit[0]] if hit else text
    return samples
