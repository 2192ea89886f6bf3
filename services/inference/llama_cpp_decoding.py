"""The autoregressive loop of the llama.cpp engine: a batch of rows, one KV-cache stream per row.

The same contract as `services.inference.decoding.decode_rows` (the torch engine's loop): prompt-major samples,
every sampled token with its behaviour log-probability (`services.inference.sampling`), EOS and stop strings,
length, abort; the same `DecodeProgress` reports. What differs is the cache:

- Prefill: each prompt is one sequence. A prompt that shares a prefix with an earlier one (the proposer prompts of a
  task type share ~900 tokens) starts from a copy of that one's cache cut at the prefix and computes only its own
  tokens; the tokens of several prompts are packed into one `batch_tokens` forward. Its n samples then copy it.
- Decoding: one token per live row per forward, every row in one batch; a finished row's stream is cleared.
- Waves: rows are decoded in waves that fit the engine's limits (`max_sequences` rows, `context_tokens` cells in
  all, a row's stream holding its prompt and `max_new_tokens`); each wave gets a cache of its shape
  (`ContextFor`), a cached one when it is large enough.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

from services.inference.decoding import DecodeProgress, FinishReason, RawSample, RowSpec, append_token, with_texts
from services.inference.llama_cpp_runtime import LlamaContext, Token
from services.inference.prefill import shared_prefix_plan
from services.inference.sampling import choose_tokens
from services.ports import InferenceError

Generators = torch.Generator | None | list[torch.Generator | None]
ContextFor = Callable[[int, int], LlamaContext]
"""(rows, cells per row) -> a cleared cache with at least that many streams of at least that many cells."""


@dataclass
class _Row:
    """One sample being decoded: its sequence (stream) in the cache and the position its next token goes to."""

    index: int  # sample index (prompt-major)
    sequence: int
    position: int
    sample: RawSample


@dataclass(frozen=True)
class Wave:
    """Prompts decoded together, and the stream size each of their rows needs."""

    prompts: list[int]
    cells_per_row: int


def plan_waves(prompts: Sequence[Sequence[int]], repeats: int, max_new_tokens: int, *, context_tokens: int,
               max_sequences: int) -> list[Wave]:
    """Prompt indices per wave, in order: each wave's rows fit `max_sequences` and its rows x (longest prompt +
    `max_new_tokens` + 1) cells fit `context_tokens`. InferenceError when one prompt's rows alone cannot fit."""
    if repeats > max_sequences:
        raise InferenceError(f"n = {repeats} samples of one prompt exceed the engine's {max_sequences} sequences "
                             "(AZR_LLAMA_CPP_SEQUENCES)")
    waves: list[Wave] = []
    wave: list[int] = []
    longest = 0
    for index, prompt in enumerate(prompts):
        alone = repeats * (len(prompt) + max_new_tokens + 1)
        if alone > context_tokens:
            raise InferenceError(f"{repeats} row(s) of a {len(prompt)}-token prompt with {max_new_tokens} new "
                                 f"tokens need {alone} cache cells; the engine has {context_tokens} "
                                 "(AZR_LLAMA_CPP_CONTEXT_TOKENS)")
        widest = max(longest, len(prompt))
        rows = (len(wave) + 1) * repeats
        if wave and (rows > max_sequences or rows * (widest + max_new_tokens + 1) > context_tokens):
            waves.append(Wave(wave, longest + max_new_tokens + 1))
            wave, widest = [], len(prompt)
        wave.append(index)
        longest = widest
    if wave:
        waves.append(Wave(wave, longest + max_new_tokens + 1))
    return waves


def decode_rows_llama(context_for: ContextFor, prompts: Sequence[Sequence[int]], spec: RowSpec, *, repeats: int,
                      eos_ids: set[int], detokenize: Callable[[Sequence[int]], str], generator: Generators,
                      context_tokens: int, max_sequences: int, abort: threading.Event | None = None,
                      on_step: Callable[[DecodeProgress], None] | None = None,
                      threads: Callable[[], int] | None = None) -> list[RawSample]:
    """Sample `repeats` continuations of each prompt (prompt-major); see the module docstring. `generator`: one
    for all rows or one per sample; `threads`, when given, is asked before every forward how many threads to use
    (the embedded run leaves cores to busy sandbox workers)."""
    if not prompts or any(len(p) == 0 for p in prompts):
        raise ValueError("every prompt needs at least one token")
    samples = [RawSample() for _ in range(len(prompts) * repeats)]
    waves = plan_waves(prompts, repeats, spec.max_new_tokens, context_tokens=context_tokens,
                       max_sequences=max_sequences)
    counted = _Counter(total_rows=len(samples))
    for wave in waves:
        context = context_for(len(wave.prompts) * repeats, wave.cells_per_row)
        _decode_wave(context, prompts, wave.prompts, spec, repeats=repeats, eos_ids=eos_ids, detokenize=detokenize,
                     generator=generator, samples=samples, abort=abort, on_step=on_step, threads=threads,
                     counted=counted)
    return with_texts(samples, spec, detokenize)


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
            row.position += 1
            if not append_token(row.sample, token, logprob, spec, eos_ids, detokenize):
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
