"""The trainer: the TRR++ / PPO objective's switches, AdamW, how an update is split and its precision, checkpoints,
and LoRA."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar, Literal

from pydantic import Field, field_validator

from services.settings.section import SettingsSection


class LoraSettings(SettingsSection):
    """Low-rank adapters instead of full fine-tuning (PEFT), and how a new LoRA run may start (a snapshot, the format
    warm-up); a resumed run keeps the adapters' shape and dropout."""

    RESUMED: ClassVar[frozenset[str]] = frozenset({"lora_rank", "lora_alpha", "lora_dropout", "lora_target_modules"})

    lora_rank: int = Field(0, ge=0)
    """LoRA rank r (PEFT): train low-rank adapters on `lora_target_modules` instead of every weight; 0 = off (full
    fine-tuning, the paper's setting). With LoRA the optimizer holds only the adapters, checkpoints store the adapters
    (plus optimizer and RNG state) and name the base model, and every push serves the merged weights."""
    lora_alpha: float = Field(32.0, gt=0)
    """LoRA scaling numerator: the adapter's update is scaled by alpha / r."""
    lora_dropout: float = Field(0.0, ge=0, lt=1)
    """Dropout on the LoRA branch's input during updates (0: none, so the recomputed old log-probs stay exact)."""
    lora_init_adapter: Path | None = None
    """A LoRA run's portable snapshot (trainer_svc/snapshot.py: one file of adapter weights) a new run starts from
    instead of zero-initialised adapters; its trainer step and policy version continue from the snapshot's header,
    its AdamW moments restart from zero. For a run whose directory did not survive a change of machine (not in the
    paper)."""
    format_warmup_per_type: int = Field(0, ge=0)
    """The format warm-up switch (not in the paper; the self-play issue allows it for a model that writes almost no
    valid task at step 0): a new LoRA run first makes one supervised pass over this many of the authors' seed triplets
    per proposer kind, written as well-formed proposals (trainer_svc/format_warmup.py; never CRUXEval), and starts
    self-play from the adapters it leaves (saved as `format-warmup.safetensors` in the run directory, with the
    examples beside it). 0: off (the paper; configs/paper.toml and authors-code.toml). Ignored when
    `lora_init_adapter` is set or the run resumes."""
    format_warmup_epochs: int = Field(2, ge=1)
    """Passes of the format warm-up over its examples (at the run's LoRA learning rate)."""
    lora_target_modules: list[str] = Field(
        default_factory=lambda: ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"])
    """Module names (PEFT `target_modules`) that get adapters: every attention and MLP projection of Qwen2 / Llama
    decoder layers by default."""


class TrainerSettings(SettingsSection):
    """One update of the policy (Eq 8-9, AdamW), its memory and precision, checkpoints and server checks; `lora` its
    adapters. `device` and `temperature` copy the run's device and the rollouts' sampling temperature (the log-probs
    of the update are taken at the temperature the samples were drawn at)."""

    RESUMED: ClassVar[frozenset[str]] = frozenset({
        "learning_rate", "grad_clip", "weight_decay", "entropy_coef", "skip_zero_advantage_batches", "clip_ratio_low",
        "clip_ratio_high", "clip_ratio_c", "loss_agg_mode", "loss_agg_micro_batch_size", "trr_statistics",
        "behaviour_is_cap", "ppo_epochs", "micro_batch_size", "micro_batch_tokens", "logprob_chunk_tokens",
        "gradient_checkpointing", "prompt_gradient", "trainer_bf16", "trainer_bf16_cpu"})
    MIRRORED: ClassVar[dict[str, str]] = {"device": "run", "temperature": "rollout"}

    learning_rate: float = Field(1e-6, gt=0)
    """AdamW learning rate, constant."""
    grad_clip: float = Field(1.0, gt=0)
    """Gradient-norm clip."""
    weight_decay: float = Field(0.01, ge=0)
    """AdamW decoupled weight decay; 0.01 is what the authors' paper-branch veRL ran with (its code default)."""
    entropy_coef: float = Field(0.001, ge=0)
    """Entropy bonus coefficient: the paper's Table 3 gives 0.001, the authors' released code 0.0. At 0 the update
    forwards and backwards only the episodes whose advantage is nonzero (the others add exactly nothing to the
    gradient; the loss keeps the whole batch's token count as its denominator), so its cost follows the signal."""
    skip_zero_advantage_batches: bool = False
    """A batch in which every Eq 8 advantage is 0 (every group's rewards equal) makes no optimizer step: the weights,
    AdamW's moments and its step count stay as they were, and the policy version still advances so the pipeline never
    waits. Off: such a batch steps on the entropy bonus alone (the paper's Table 3), which AdamW normalises into a
    full-size step of ~lr on every trainable parameter, and with entropy 0 momentum and weight decay still move it."""
    clip_ratio_low: float = Field(0.2, ge=0, lt=1)
    """PPO ratio clip below: the ratio is clipped at 1 − this (Eq 9's ε; the paper prints no value, its branch's
    veRL uses 0.2, the released code's `clip_ratio_low` 0.2)."""
    clip_ratio_high: float = Field(0.2, ge=0)
    """PPO ratio clip above: the ratio is clipped at 1 + this (the paper: the same ε, 0.2 in its branch's veRL; the
    released code: 0.28, clip-higher)."""
    clip_ratio_c: float = Field(0.0, ge=0)
    """Dual clip for negative advantages: a token's loss is capped at −A·c where A < 0; 0 = off (the paper's Eq 9 has
    none); the released code: 3.0. Must be 0 or > 1."""
    loss_agg_mode: Literal["token-mean", "micro-batch-token-mean", "seq-mean-token-mean"] = "token-mean"
    """How Eq 9's token losses (and the entropy bonus) become the batch loss: `token-mean` over the whole batch (this
    project); `micro-batch-token-mean`, each fixed group of `loss_agg_micro_batch_size` sequences' token-mean,
    averaged (the released code's and the paper branch's veRL); `seq-mean-token-mean`, each sequence's token-mean,
    averaged (Eq 9 as the paper writes it). None depends on how the trainer splits a batch for memory."""
    loss_agg_micro_batch_size: int = Field(16, ge=1)
    """Sequences per aggregation group of `micro-batch-token-mean`, in the batch's order (the released code's
    `ppo_micro_batch_size_per_gpu`: 16, on one data-parallel rank; the paper's Eq 9 has no such groups)."""
    trr_statistics: Literal["per-sample", "token-weighted"] = "per-sample"
    """TRR++ (Eq 8) group mean and std: `per-sample`, one reward per sequence, population std, eps added to σ (the
    paper's Eq 8); `token-weighted`, over the group's response tokens with Bessel's correction and eps = 1e-8 inside
    the square root (the released code's veRL masked_whiten)."""
    behaviour_is_cap: float = Field(0.0, ge=0)
    """Truncated importance sampling of the engine/trainer mismatch (not in the paper; veRL's `tis_imp_ratio_cap`):
    each token's loss is weighted by min(π_old / π_engine, cap), so an update from tokens another engine sampled
    (int8 or bf16 weights) is the policy gradient of the trainer's policy. 0: off (the paper, the released code);
    the learning preset, whose engine is int8 (per-token mean |log π_old − log π_engine| ~0.2-0.3), uses 2."""
    ppo_epochs: int = Field(1, ge=1)
    """PPO epochs per batch."""
    micro_batch_size: int = Field(4, ge=1)
    """Most sequences per forward/backward pass; gradients accumulate over micro-batches (bounds memory)."""
    micro_batch_tokens: int = Field(16_384, ge=0)
    """Also cap a micro-batch at this many padded tokens (rows x longest sequence), so the trainer's activation memory
    is bounded by this number whatever the batch size or response length (a longer single sequence gets a micro-batch
    of its own); 0 = no token cap. 16,384 is veRL's per-GPU token budget and holds one sequence at the distributed
    profile's 6,144 + 8,096-token limit."""
    logprob_chunk_tokens: int = Field(512, ge=1)
    """Response positions whose vocabulary logits exist at once: the LM head is applied per chunk of this many tokens
    inside the log-prob/entropy function, so a micro-batch never holds [tokens, V] logits (trainer_svc/
    head_logprobs.py); each chunk's float32 working buffer is this x V x 4 bytes (512 x 151,936: 311 MB)."""
    gradient_checkpointing: bool = False
    """Recompute each decoder layer's activations in the backward pass instead of keeping them: about a third more
    compute, activation memory of one layer instead of all. On in both profiles: embedded, where a 0.5B model's
    micro-batch of ~2k-token sequences otherwise needs more than a 24 GB machine has, and distributed (8,096-token
    responses), where under torchrun each decoder layer is checkpointed before FSDP shards it."""
    prompt_gradient: bool = True
    """True (the paper, the authors' code): the update's gradient flows through the whole sequence. False (not in the
    paper; a CPU lever): each prompt, but its last token, runs without autograd and leaves its keys and values as
    constants, and only the positions that predict response tokens run with gradients (Transformer-XL's stop-gradient
    on its cached segment). The log-probs, ratios and losses are the same numbers; the gradient leaves out what
    reaches the weights through the prompt's keys and values. A proposer's ~1,800-token prompt costs one forward
    instead of a forward, a recomputation and a backward (docs/trainer-scaling.md has the measured cost and how far
    the gradient moves)."""
    trainer_bf16: bool = True
    """Run the trainer's forward passes under bf16 autocast on CUDA (fp32 master weights); see `trainer_bf16_cpu`."""
    trainer_bf16_cpu: bool = False
    """Also on a CPU with native bf16 (AVX512-BF16/AMX; elsewhere ignored: emulated bf16 is slower than float32).
    The embedded profile turns it on: an update of the default model ran 1.66x faster on 2 such cores
    (docs/benchmarks.md)."""
    checkpoint_every: int = Field(1, ge=1)
    """k: write the full resumable checkpoint (fp32 weights, AdamW moments, RNG states, applied episode ids) after
    every k-th update; bf16 weights are pushed to the inference servers after every update regardless. Episodes are
    acknowledged only once the full checkpoint holding their update is durable, so after a crash the trainer resumes
    from the last one and the at most k - 1 updates since are redone from the redelivered episodes."""
    server_check_every_s: float = Field(10.0, gt=0)
    """How often the trainer asks every inference server for its `/model_info` weight_version; a server that reports
    another version than the one last pushed (restarted from the base model, or missed a push while down) gets the
    current weights again. A failed push is retried the same way instead of stopping the trainer."""
    keep_checkpoints: int = Field(3, ge=1)
    """Checkpoints kept in the run directory; older ones are deleted after a new one is durable."""
    lora: LoraSettings = Field(default_factory=LoraSettings)
    """LoRA adapters (`lora_rank` > 0) or full fine-tuning."""
    device: str = Field("auto", exclude=True)
    """The run's `device` (a copy: Settings fills it)."""
    temperature: float = Field(1.0, exclude=True)
    """The rollouts' `temperature` (a copy: Settings fills it)."""

    @field_validator("clip_ratio_c")
    @classmethod
    def _dual_clip_is_off_or_above_one(cls, value: float) -> float:
        if value != 0.0 and value <= 1.0:
            raise ValueError("the dual clip must be 0 (off) or > 1 (it caps the loss at −A·c for A < 0)")
        return value
