"""The format warm-up: one supervised pass of LoRA adapters over well-formed seed proposals, saved as a snapshot.

A switch, not the paper (its runs start self-play from the base weights): the self-play issue allows it when the
model writes almost no valid task at step 0, and every result it touches names it. The loss is the mean negative
log-likelihood of each example's response tokens (the prompt's tokens carry none), the example's end-of-turn token
included so the model learns to stop after `</answer>`; AdamW over the adapters alone, gradients clipped. Its output
is a portable snapshot (trainer_svc/snapshot.py, origin "format-warmup"). A new run with `format_warmup_per_type`
> 0 does it before its first step (trainer_svc/resume.py `load_or_restore`, given the run's `WarmupPlan`); `azr
warmup` writes one apart.
"""

from __future__ import annotations

import json
import math
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import torch
from torch import nn

from services.algorithm.warmup_examples import WarmupExample, warmup_examples
from services.inference.chat_codec import PromptCodec
from services.settings import TrainerSettings
from services.settings.profiles import PACKAGED_SEED_FILES

SNAPSHOT_FILE = "format-warmup.safetensors"
"""The warm-up's adapters in a run directory (its examples beside it, `<file>.examples.jsonl`)."""


@dataclass(frozen=True)
class WarmupPlan:
    """What the warm-up reads of a run's settings, across their sections (azr.factory.parts.warmup_plan gathers
    it): the seed files, the proposer prompts' shape (K, N, the prompt budget), the run's seed, the base model's
    name, and how many examples and passes."""

    seed_files: list[Path]
    """The rollout section's `seed_files` (the packaged authors' files when empty)."""
    references_k: int
    """K of the deduction/abduction proposer prompts."""
    induction_inputs: int
    """N of the induction proposer prompts."""
    max_prompt_tokens: int
    """The prompt budget an example must fit."""
    seed: int
    """The run's seed: which seed triplets are drawn."""
    model: str
    """The base model's name, recorded in the snapshot."""
    per_type: int
    """Examples per proposer kind (`format_warmup_per_type`; 0: no warm-up)."""
    epochs: int
    """Passes over the examples (`format_warmup_epochs`)."""


@dataclass(frozen=True)
class WarmupSettings:
    """What the supervised pass needs: its optimiser and its passes (the CLI fills it from the run's settings)."""

    learning_rate: float = 1e-4
    """AdamW step size: the run's LoRA learning rate (configs/selfplay-cpu.toml)."""
    epochs: int = 1
    """Passes over the examples."""
    grad_clip: float = 1.0
    """Global gradient-norm clip (Table 3's value for the RL updates)."""
    examples_per_step: int = 1
    """Examples per optimiser step: one, so 18 examples make 18 steps (at 1.5B on 2 cores each pass costs ~1.5 min,
    so the warm-up cannot buy steps with more examples)."""


@dataclass
class WarmupReport:
    """What the pass did: per optimiser step the mean response NLL (nats per token) before its update."""

    examples: int
    response_tokens: int
    step_losses: list[float] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def first_loss(self) -> float:
        """Mean loss of the first third of the steps (each measured on examples before their own update)."""
        third = max(1, len(self.step_losses) // 3)
        return sum(self.step_losses[:third]) / third if self.step_losses else math.nan

    @property
    def last_loss(self) -> float:
        """Mean loss of the last third of the steps: one example's loss varies more than the pass moves it."""
        third = max(1, len(self.step_losses) // 3)
        return sum(self.step_losses[-third:]) / third if self.step_losses else math.nan


@dataclass(frozen=True)
class EncodedExample:
    """An example as token ids: the prompt (no loss) and the response with its end-of-turn token (the loss)."""

    prompt_ids: list[int]
    response_ids: list[int]


def seed_rows(plan: WarmupPlan) -> tuple[list[dict], list[dict]]:
    """The seed triplets and the induction seeds of the run's seed files (the packaged authors' files when none)."""
    io_rows: list[dict] = []
    f_rows: list[dict] = []
    for path in list(plan.seed_files) or list(PACKAGED_SEED_FILES):
        rows = [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]
        (f_rows if rows and "inputs" in rows[0] else io_rows).extend(rows)
    if not io_rows or not f_rows:
        raise ValueError("the format warm-up needs triplet and induction seed files (the authors' two), got "
                         f"{[str(p) for p in plan.seed_files]}")
    return io_rows, f_rows


def prepare_examples(plan: WarmupPlan, codec: PromptCodec) -> list[WarmupExample]:
    """The plan's examples per proposer kind, drawn with the run's seed, K and prompt budget."""
    io_rows, f_rows = seed_rows(plan)
    return warmup_examples(io_rows, f_rows, per_type=plan.per_type, references_k=plan.references_k,
                           num_inputs=plan.induction_inputs, rng=random.Random(plan.seed),
                           fits=lambda text: len(codec.prompt_ids(text)) <= plan.max_prompt_tokens)


def write_examples(examples: Sequence[WarmupExample], encoded: Sequence[EncodedExample], target: Path) -> None:
    """The examples a warm-up learned from, one JSON row each, beside its snapshot."""
    target.parent.mkdir(parents=True, exist_ok=True)
    with target.open("w") as handle:
        for example, ids in zip(examples, encoded):
            handle.write(json.dumps({"task_type": example.task_type.value, "seed_index": example.seed_index,
                                     "prompt_tokens": len(ids.prompt_ids), "response": example.response}) + "\n")


def encode_examples(codec: PromptCodec, examples: Sequence[WarmupExample]) -> list[EncodedExample]:
    """Each example's prompt as the run renders it (chat template, opened `<think>`) and its response, ended by the
    tokenizer's EOS (Qwen's `<|im_end|>`: the token a run's sample stops at)."""
    eos = sorted(codec.eos_token_ids())
    return [EncodedExample(codec.prompt_ids(example.instruction), codec.encode(example.response) + eos[:1])
            for example in examples]


def response_nll(model: nn.Module, example: EncodedExample) -> torch.Tensor:
    """Mean negative log-likelihood (nats per token) of ``example``'s response tokens given its prompt: a scalar.

    The prompt (all but its last token) runs once without autograd and leaves its key/value cache; only the last
    prompt token and the response run with gradients, and the LM head is applied to those positions alone. The
    value is the full forward's; the gradient leaves out what flows into the adapters through the prompt's keys and
    values (a format warm-up teaches the response; on a 1,400-token prompt with a 250-token response this halves
    the pass, backward included, and never builds the prompt's [tokens, vocabulary] logits)."""
    from services.inference.causal_lm import hf_model
    from trainer_svc.activation_checkpointing import activations_kept
    from trainer_svc.policy_forward import response_hidden

    causal = hf_model(model)
    prompt, response = example.prompt_ids, example.response_ids
    positions = torch.arange(len(prompt) - 1, len(prompt) - 1 + len(response)).unsqueeze(0)
    ids = torch.tensor([prompt + response])
    with activations_kept():  # the response's activations are few: kept rather than recomputed
        hidden = response_hidden(model, ids, torch.ones_like(ids), positions, prompt_gradient=False)[0]
    logits = causal.lm_head(hidden).float()
    return torch.nn.functional.cross_entropy(logits, torch.tensor(response))


def run_warmup(model: nn.Module, examples: Sequence[EncodedExample], settings: WarmupSettings,
               say: Callable[[str], None] = lambda _: None) -> WarmupReport:
    """Train ``model``'s trainable parameters (the adapters) on ``examples``, in order, ``settings.epochs`` times."""
    parameters = [p for p in model.parameters() if p.requires_grad]
    if not parameters:
        raise ValueError("the warm-up trains LoRA adapters: the model has no trainable parameter")
    optimizer = torch.optim.AdamW(parameters, lr=settings.learning_rate, weight_decay=0.0)
    report = WarmupReport(examples=len(examples), response_tokens=sum(len(e.response_ids) for e in examples))
    began = time.perf_counter()
    model.train()
    per_step = settings.examples_per_step
    for epoch in range(settings.epochs):
        for first in range(0, len(examples), per_step):
            chunk = examples[first:first + per_step]
            optimizer.zero_grad(set_to_none=True)
            total = 0.0
            for example in chunk:
                loss = response_nll(model, example) / len(chunk)
                loss.backward()
                total += float(loss.detach())
            torch.nn.utils.clip_grad_norm_(parameters, settings.grad_clip)
            optimizer.step()
            report.step_losses.append(total)
            say(f"warm-up epoch {epoch + 1} examples {first + 1}-{first + len(chunk)}: response NLL {total:.3f} "
                f"nats/token ({time.perf_counter() - began:.0f} s)")
    model.eval()
    report.seconds = time.perf_counter() - began
    return report


def warm_up(model: nn.Module, model_dir: Path, plan: WarmupPlan, trainer: TrainerSettings, out: Path, *,
            say: Callable[[str], None] = lambda _: None) -> WarmupReport:
    """The whole switch on ``model`` (adapters added): the plan's examples, the supervised pass at the trainer's
    learning rate and clip, the snapshot at ``out`` and the examples beside it."""
    codec = PromptCodec.from_model_dir(model_dir)
    examples = prepare_examples(plan, codec)
    encoded = encode_examples(codec, examples)
    write_examples(examples, encoded, out.with_name(out.name + ".examples.jsonl"))
    say(f"format warm-up (a switch, not the paper): {len(examples)} seed proposals, "
        f"{sum(len(e.prompt_ids) for e in encoded)} prompt and {sum(len(e.response_ids) for e in encoded)} response "
        f"tokens, {plan.epochs} epoch(s)")
    report = run_warmup(model, encoded, WarmupSettings(learning_rate=trainer.learning_rate, epochs=plan.epochs,
                                                       grad_clip=trainer.grad_clip), say=say)
    write_warmup_snapshot(model, out, model_name=plan.model, report=report)
    say(f"format warm-up: response NLL {report.first_loss:.3f} -> {report.last_loss:.3f} nats/token (first and last "
        f"third of its steps) in "
        f"{report.seconds:.0f} s; adapters in {out}")
    return report


def write_warmup_snapshot(model: nn.Module, target: Path, *, model_name: str, report: WarmupReport) -> Path:
    """The adapters as a portable snapshot at step 0, policy version 0, its origin "format-warmup"."""
    import tempfile

    from trainer_svc.lora import save_adapters
    from trainer_svc.snapshot import write_snapshot

    with tempfile.TemporaryDirectory(prefix="azr-warmup-") as staging:
        save_adapters(model, Path(staging))
        return write_snapshot(Path(staging), target, model=model_name, step=0, policy_version=0,
                              origin="format-warmup",
                              note=f"{report.examples} examples, {report.response_tokens} response tokens, "
                                   f"NLL {report.first_loss:.3f} -> {report.last_loss:.3f}")
