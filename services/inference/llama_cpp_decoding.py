"""The autoregressive loop of the llama.cpp engine: a batch of rows in one unified KV cache.

The same contract as `services.inference.decoding.decode_rows` (the torch engine's loop): prompt-major samples,
every sampled token with its behaviour log-probability (`services.inference.sampling`), EOS and stop strings,
length, abort; the same `DecodeProgress` reports. What differs is the cache:

- Prefill: each prompt is one sequence. A prompt that shares a prefix with an earlier one (the proposer prompts of a
  task type share ~900 tokens) starts from a copy of that prefix (`llama_memory_seq_cp`: in a unified cache the cells
  are shared, not copied) and computes only its own tokens; the tokens of several prompts are packed into one
  `batch_tokens` forward. Its n samples then copy the whole prompt.
- Decoding: one token per live row per forward, every row in one batch; a finished row's cells are freed at once.
- Waves: rows whose prompts and `max_new_tokens` would not fit `context_tokens` cells (or `max_sequences`) are
  decoded in successive waves, each on a cleared cache.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

from services.inference.decoding import DecodeProgress, FinishReason, RawSample, RowSpec, first_stop
from services.inference.llama_cpp_runtime import LlamaContext, Token
from services.inference.prefill import shared_prefix_plan
from services.inference.sampling import choose_tokens
from services.ports import InferenceError

CACHE_MARGIN = 0.9
"""Share of the cache a wave plans to use: llama.cpp wants contiguous free cells for a prefill chunk."""

Generators = torch.Generator | None | list[torch.Generator | None]


@dataclass
class _Row:
    """One sample being decoded: its sequence in the cache and the position its next token goes to."""

    index: int  # sample index (prompt-major)
    sequence: int
    position: int
    sample: RawSample


def plan_waves(prompts: Sequence[Sequence[int]], repeats: int, max_new_tokens: int, *, context_tokens: int,
               max_sequences: int) -> list[list[int]]:
    """Prompt indices per wave, in order: each wave's unshared prompt tokens plus its rows' new tokens fit
    `CACHE_MARGIN` of the cache, and its rows fit the sequences. InferenceError when one prompt alone cannot fit."""
    budget = int(context_tokens * CACHE_MARGIN)
    if repeats > max_sequences:
        raise InferenceError(f"n = {repeats} samples of one prompt exceed the engine's {max_sequences} sequences "
                             "(AZR_LLAMA_CPP_SEQUENCES)")
    waves: list[list[int]] = []
    wave: list[int] = []
    for index, prompt in enumerate(prompts):
        alone = len(prompt) + repeats * max_new_tokens
        if alone > budget:
            raise InferenceError(f"a prompt of {len(prompt)} tokens with {repeats} x {max_new_tokens} new tokens "
                                 f"needs {alone} cache cells; the engine has {context_tokens} "
                                 "(AZR_LLAMA_CPP_CONTEXT_TOKENS)")
        candidate = wave + [index]
        cost = _wave_cells([prompts[i] for i in candidate], repeats, max_new_tokens)
        if wave and (cost > budget or len(candidate) * repeats > max_sequences):
            waves.append(wave)
            candidate = [index]
        wave = candidate
    if wave:
        waves.append(wave)
    return waves


def _wave_cells(prompts: Sequence[Sequence[int]], repeats: int, max_new_tokens: int) -> int:
    plan = shared_prefix_plan(prompts)
    return sum(len(p) - taken for p, (_, taken) in zip(prompts, plan)) + len(prompts) * repeats * max_new_tokens


def decode_rows_llama(context: LlamaContext, prompts: Sequence[Sequence[int]], spec: RowSpec, *, repeats: int,
                      eos_ids: set[int], detokenize: Callable[[Sequence[int]], str], generator: Generators,
                      abort: threading.Event | None = None,
                      on_step: Callable[[DecodeProgress], None] | None = None,
                      threads: Callable[[], int] | None = None) -> list[RawSample]:
    """Sample `repeats` continuations of each prompt (prompt-major); see the module docstring. `generator`: one
    for all rows or one per sample; `threads`, when given, is asked before every forward how many threads to use
    (the embedded run leaves cores to busy sandbox workers)."""
    if not prompts or any(len(p) == 0 for p in prompts):
        raise ValueError("every prompt needs at least one token")
    samples = [RawSample() for _ in range(len(prompts) * repeats)]
    waves = plan_waves(prompts, repeats, spec.max_new_tokens, context_tokens=context.context_tokens,
                       max_sequences=context.max_sequences)
    counted = _Counter(total_rows=len(samples))
    for wave in waves:
        _decode_wave(context, prompts, wave, spec, repeats=repeats, eos_ids=eos_ids, detokenize=detokenize,
                     generator=generator, samples=samples, abort=abort, on_step=on_step, threads=threads,
                     counted=counted)
    for sample in samples:
        text = detokenize(sample.output_ids)
        hit = first_stop(text, spec.stop) if sample.finish_reason == "stop" and isinstance(sample.matched, str) \
            else None
        sample.text = text[:hit[0]] if hit else text
    return samples


@dataclass
class _Counter:
    total_rows: int
    sampled: int = 0


def _decode_wave(context: LlamaContext, prompts: Sequence[Sequence[int]], wave: list[int], spec: RowSpec, *,
                 repeats: int, eos_ids: set[int], detokenize: Callable[[Sequence[int]], str], generator: Generators,
                 samples: list[RawSample], abort: threading.Event | None,
                 on_step: Callable[[DecodeProgress], None] | None, threads: Callable[[], int] | None,
                 counted: _Counter) -> None:
    context.clear()
    wave_prompts = [prompts[i] for i in wave]
    last_logits = _prefill(context, wave_prompts, repeats, spec.max_new_tokens, on_step, threads)
    rows = [_Row(index=p * repeats + r, sequence=j * repeats + r, position=len(prompts[p]),
                 sample=samples[p * repeats + r]) for j, p in enumerate(wave) for r in range(repeats)]
    logits = last_logits.repeat_interleave(repeats, dim=0)
    live = rows
    for step in range(spec.max_new_tokens):
        if abort is not None and abort.is_set():
            break
        if step > 0:
            if threads is not None:
                context.set_threads(threads())
            logits = torch.from_numpy(context.decode(
                [Token(row.sample.output_ids[-1], row.position - 1, row.sequence, True) for row in live]))
        row_generator = [generator[row.index] for row in live] if isinstance(generator, list) else generator
        tokens, logprobs = choose_tokens(logits, spec.temperature, spec.top_p, spec.top_k, row_generator)
        counted.sampled += len(live)
        still = []
        for row, token, logprob in zip(live, tokens.tolist(), logprobs.tolist()):
            sample = row.sample
            sample.output_ids.append(token)
            sample.logprobs.append(logprob)
            row.position += 1
            if token in eos_ids:
                sample.finish_reason, sample.matched = "stop", token
            elif spec.stop and (hit := first_stop(detokenize(sample.output_ids), spec.stop)) is not None:
                sample.finish_reason, sample.matched = "stop", hit[1]
            else:
                still.append(row)
                continue
            context.drop_sequence(row.sequence)
        if on_step is not None:
            last = step + 1 == spec.max_new_tokens
            on_step(DecodeProgress(step=step + 1, max_new_tokens=spec.max_new_tokens, rows=counted.total_rows,
                                   live=0 if last else len(still), tokens=counted.sampled))
        live = still
        if not live:
            break
    unfinished: FinishReason = "abort" if abort is not None and abort.is_set() else "length"
    for row in live:
        row.sample.finish_reason = unfinished if len(row.sample.output_ids) < spec.max_new_tokens else "length"
    context.clear()


def _prefill(context: LlamaContext, prompts: Sequence[Sequence[int]], repeats: int, max_new_tokens: int,
             on_step: Callable[[DecodeProgress], None] | None, threads: Callable[[], int] | None) -> torch.Tensor:
    """Every prompt into the cache as sequence `j * repeats` (shared prefixes copied, tokens of several prompts
    packed per forward), then copied to its other rows; returns each prompt's last-position logits [prompts, V]."""
    plan = shared_prefix_plan(prompts)
    total = sum(len(p) - taken for p, (_, taken) in zip(prompts, plan))
    last: dict[int, torch.Tensor] = {}
    pending: list[Token] = []
    owners: list[int] = []  # prompt of each output row in `pending`
    in_pending: set[int] = set()
    computed = 0

    def flush() -> None:
        nonlocal computed
        if not pending:
            return
        if threads is not None:
            context.set_threads(threads())
        logits = context.decode(pending)
        for owner, row in zip(owners, logits):
            last[owner] = torch.from_numpy(row)
        computed += len(pending)
        pending.clear()
        owners.clear()
        in_pending.clear()
        if on_step is not None:
            on_step(DecodeProgress(step=0, max_new_tokens=max_new_tokens, rows=len(prompts), live=len(prompts),
                                   tokens=0, prefilled=computed, prompt_width=total))

    for j, (prompt, (donor, taken)) in enumerate(zip(prompts, plan)):
        sequence = j * repeats
        if donor is not None:
            if donor in in_pending:
                flush()
            context.copy_sequence(donor * repeats, sequence, taken)
        for position in range(taken, len(prompt)):
            is_last = position == len(prompt) - 1
            pending.append(Token(prompt[position], position, sequence, is_last))
            in_pending.add(j)
            if is_last:
                owners.append(j)
            if len(pending) == context.batch_tokens:
                flush()
    flush()
    for j in range(len(prompts)):
        for r in range(1, repeats):
            context.copy_sequence(j * repeats, j * repeats + r)
    return torch.stack([last[j] for j in range(len(prompts))])
