"""One TRR++ PPO update: advantages per group (Eq 8), PPO-clip token-mean loss (Eq 9) with an entropy bonus (both
services/algorithm/policy_objective.py: the loop calls `policy_loss_terms` per micro-batch), gradient accumulation
over micro-batches, grad-norm clip, one AdamW step per PPO epoch.

π_old of the PPO ratio is recomputed by the policy (as the authors' veRL trainer does before its update): the first
epoch's log-probs under the current weights, detached (the value a no-grad pass with the same weights gives, without
a second forward), taken before any optimizer step. So an on-policy batch starts at a ratio of exactly 1 whatever the
inference engine reported; the engine's log-probs (the episodes' behaviour log-probs) only feed the mismatch metrics
`logprob_mismatch_abs` (mean |log π_engine − log π_trainer| per token) and `logprob_mismatch_kl` (the k3 estimate of
KL(π_engine || π_trainer), E[ρ − 1 − log ρ] with ρ = π_trainer / π_engine, over the engine's samples). For an episode
several versions old the recomputed values are the current weights', the proximal policy of decoupled PPO.

Under torchrun (``ranks`` set) the policy is FSDP-sharded (`fsdp_wrap`) and every rank runs ``update`` on the same
batch: rank 0 announces it (`rank_commands`), the others receive it (`rank_follower`). Each rank trains on its share
of the micro-batches (`rank_share`) with the same denominator, the token count of the whole batch (every rank holds
the whole batch, so no count needs exchanging); FSDP sums the gradients across ranks, so the N-rank gradient is the
one-process gradient, up to float summation order. The clip uses the total norm over all shards, and the report's
sums are added up across ranks, so every rank reports what one process would.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields, replace

import torch
from torch import nn

from services.algorithm.policy_objective import (
    DEFAULT_POLICY_LOSS,
    LOG_RATIO_CLAMP,
    PolicyLoss,
    PolicyLossTerms,
    policy_loss_terms,
    trr_advantages,
)
from services.algorithm.task_types import TASK_GROUPS
from services.records import Episode
from services.records.updates import GroupStats, UpdateReport
from services.settings import TrainerSettings
from trainer_svc.batching import (
    MicroBatch,
    build_micro_batches,
    response_tokens_of,
    total_response_tokens,
)
from trainer_svc.distributed_env import RankInfo, all_reduce_floats
from trainer_svc.fsdp_wrap import grad_norm_value
from trainer_svc.head_logprobs import DEFAULT_CHUNK_TOKENS
from trainer_svc.memory import peak_memory_mb, reset_peak_memory
from trainer_svc.policy_forward import autocast_for, bf16_autocast, forwarded_positions, logprobs_and_entropy
from trainer_svc.rank_commands import UpdateCommand, announce
from trainer_svc.rank_share import RankShare, rank_share, whole_batch

log = logging.getLogger(__name__)


@dataclass
class AccumulatedStats:
    """Token-weighted sums over one pass of micro-batches (divide by ``tokens`` for means)."""

    tokens: int = 0  # N, the loss's denominator: the whole batch's response tokens
    trained_tokens: int = 0  # response tokens of the micro-batches this pass went through (this rank's share)
    padded_tokens: int = 0
    loss: float = 0.0  # already the batch loss (aggregated by loss_agg_mode): the sum of the micro-batch losses
    pg_loss: float = 0.0
    entropy_sum: float = 0.0
    clip_sum: float = 0.0
    kl_sum: float = 0.0
    ratio_max: float = 0.0
    mismatch_tokens: int = 0  # response tokens with an engine log-prob (first epoch)
    mismatch_abs_sum: float = 0.0
    mismatch_kl_sum: float = 0.0
    is_capped_tokens: int = 0  # response tokens whose truncated importance weight hit `behaviour_is_cap`
    is_weighted_tokens: int = 0  # response tokens that carried an importance weight (an engine log-prob)


_NOT_SUMMED = ("tokens", "ratio_max")
"""The AccumulatedStats that ranks do not add up: N is the whole batch's on every rank; the ratio's max is a max."""


@dataclass(frozen=True)
class MicroBatchProgress:
    """Where one pass over the micro-batches stands (this rank's share), after a micro-batch's backward."""

    done: int
    total: int
    padded_tokens: int  # input positions through the model so far in this pass (`forwarded_positions`)
    elapsed_s: float  # since the pass began


def accumulate_gradients(model: nn.Module, micro_batches: list[MicroBatch], *,
                         policy_loss: PolicyLoss = DEFAULT_POLICY_LOSS, loss_weights: torch.Tensor | None = None,
                         entropy_coef: float, device: torch.device, bf16: bool = False,
                         temperature: float = 1.0, share: RankShare | None = None,
                         chunk_tokens: int = DEFAULT_CHUNK_TOKENS, token_count: int | None = None,
                         on_micro_batch: Callable[[MicroBatchProgress], None] | None = None,
                         prompt_gradient: bool = True) -> AccumulatedStats:
    """Backpropagate the batch loss, one micro-batch at a time, adding into ``.grad`` (no optimizer step).

    Each micro-batch contributes Σ_tokens ℓ_t / N with N = the response tokens of the whole batch, so the accumulated
    gradient is the gradient of the full-batch token-mean. In the first epoch (``old_logprobs`` not yet filled) the
    detached log-probs of this pass become ``old_logprobs`` (in place, in the list) and are compared with the engine's
    log-probs. ``share``: the micro-batches this rank trains on (default: all) and its idle passes; the sums in the
    returned stats cover the share only, ``tokens`` is N. ``chunk_tokens``: response positions whose logits exist at
    once (`trainer_svc.head_logprobs`). ``token_count``: N when the micro-batches hold only part of the batch (the
    episodes that carry signal); default, their own response tokens. ``on_micro_batch`` hears each finished
    micro-batch (a live display). ``policy_loss``: Eq 9's clip range and dual clip. ``loss_weights``: [B] weight of
    every response token of episode b in the batch loss (`PolicyLoss.episode_weights` of the whole batch, indexed by
    `episode_index`), for the pg loss and the entropy bonus alike; default, a token-mean over N.
    ``prompt_gradient`` False: prompts run without autograd (`TrainerSettings.prompt_gradient`).
    """
    began = time.perf_counter()
    if token_count is None:
        token_count = total_response_tokens(micro_batches)
    stats = AccumulatedStats(tokens=token_count)
    share = share or whole_batch(len(micro_batches))
    for position, index in enumerate(share.indices):
        cpu_mb = micro_batches[index]
        mb = cpu_mb.to(device)
        with autocast_for(device, bf16):
            logprobs, entropy = logprobs_and_entropy(model, mb, temperature=temperature, chunk_tokens=chunk_tokens,
                                                     prompt_gradient=prompt_gradient)
        assert entropy is not None
        if not bool(mb.has_old_logprobs.all()):
            recomputed = logprobs.detach().float()
            add_mismatch(stats, recomputed, mb)
            micro_batches[index] = replace(cpu_mb, old_logprobs=recomputed.cpu(),
                                           has_old_logprobs=torch.ones_like(cpu_mb.has_old_logprobs))
            mb = micro_batches[index].to(device)
        row_weights = (torch.full((mb.rows,), 1.0 / max(token_count, 1)) if loss_weights is None
                       else loss_weights[cpu_mb.episode_index]).to(device)
        terms = policy_loss_terms(policy_loss, logprobs=logprobs, entropy=entropy, old_logprobs=mb.old_logprobs,
                                  behaviour_logprobs=mb.behaviour_logprobs, has_behaviour=mb.has_behaviour_logprobs,
                                  advantages=mb.advantages, response_mask=mb.response_mask,
                                  sequence_weights=row_weights, entropy_coef=entropy_coef)
        terms.loss.backward()
        add_terms(stats, terms, padded_tokens=forwarded_positions(cpu_mb, prompt_gradient))
        if on_micro_batch is not None:
            on_micro_batch(MicroBatchProgress(done=position + 1, total=len(share.indices),
                                              padded_tokens=stats.padded_tokens,
                                              elapsed_s=time.perf_counter() - began))
    for _ in range(share.idle_passes):
        idle_pass(model, micro_batches[0], device=device, bf16=bf16, temperature=temperature,
                  chunk_tokens=chunk_tokens, prompt_gradient=prompt_gradient)
    return stats


def add_terms(stats: AccumulatedStats, terms: PolicyLossTerms, *, padded_tokens: int) -> None:
    """Add one micro-batch's loss terms and statistics to ``stats`` (token-weighted sums)."""
    n = terms.tokens
    stats.trained_tokens += n
    stats.padded_tokens += padded_tokens
    stats.loss += float(terms.loss.detach())
    stats.pg_loss += float(terms.pg_loss.detach())
    stats.entropy_sum += float(terms.entropy_sum.detach())
    stats.clip_sum += terms.clip_fraction * n
    stats.kl_sum += terms.approx_kl * n
    stats.ratio_max = max(stats.ratio_max, terms.ratio_max)
    stats.is_weighted_tokens += terms.importance_weighted_tokens
    stats.is_capped_tokens += terms.importance_capped_tokens


def add_mismatch(stats: AccumulatedStats, recomputed: torch.Tensor, mb: MicroBatch) -> None:
    """Add the engine/trainer log-prob differences of one micro-batch's response tokens to ``stats``."""
    mask = mb.response_mask & mb.has_behaviour_logprobs.unsqueeze(1)
    if not bool(mask.any()):
        return
    delta = (recomputed - mb.behaviour_logprobs)[mask]  # log ρ, ρ = π_trainer / π_engine
    stats.mismatch_tokens += int(mask.sum())
    stats.mismatch_abs_sum += float(delta.abs().sum())
    stats.mismatch_kl_sum += float((delta.clamp(max=LOG_RATIO_CLAMP).exp() - 1.0 - delta).sum())


def idle_pass(model: nn.Module, cpu_mb: MicroBatch, *, device: torch.device, bf16: bool, temperature: float,
              chunk_tokens: int = DEFAULT_CHUNK_TOKENS, prompt_gradient: bool = True) -> None:
    """A forward and backward whose loss is 0 × a real one: FSDP's collectives run, the gradient gets nothing."""
    mb = cpu_mb.to(device)
    with autocast_for(device, bf16):
        logprobs, _ = logprobs_and_entropy(model, mb, with_entropy=False, temperature=temperature,
                                           chunk_tokens=chunk_tokens, prompt_gradient=prompt_gradient)
    (logprobs.sum() * 0.0).backward()


def reduce_stats(stats: AccumulatedStats, ranks: RankInfo) -> AccumulatedStats:
    """The sums of every rank's share added up (``ratio_max``: the largest), as one process would have counted."""
    summed = [f for f in fields(AccumulatedStats) if f.name not in _NOT_SUMMED]
    sums = all_reduce_floats([float(getattr(stats, f.name)) for f in summed], ranks, "sum")
    (ratio_max,) = all_reduce_floats([stats.ratio_max], ranks, "max")
    reduced = replace(stats, ratio_max=ratio_max)
    for field, total in zip(summed, sums, strict=True):
        setattr(reduced, field.name, round(total) if field.type == "int" else total)
    return reduced


def group_stats(episodes: Sequence[Episode]) -> list[GroupStats]:
    """Count and mean reward of each (task type x role) group present in the batch, in TASK_GROUPS order."""
    out = []
    for task_type, role in TASK_GROUPS:
        rewards = [e.reward for e in episodes if e.task_type == task_type and e.role == role]
        if rewards:
            out.append(GroupStats(task_type=task_type.value, role=role.value, count=len(rewards),
                                  reward_mean=sum(rewards) / len(rewards)))
    return out


class PolicyTrainer:
    """Owns the policy model and its AdamW optimizer; ``update`` applies one batch of episodes.

    Under torchrun, ``ranks`` says where this process sits and ``forward_module`` is the FSDP root around the
    (already sharded) ``model`` (`fsdp_wrap.shard_policy`); in one process both stay None. ``on_micro_batch`` hears
    every micro-batch's backward pass (a live progress display).
    """

    def __init__(self, model: nn.Module, settings: TrainerSettings, *, pad_id: int, device: torch.device,
                 optimizer: torch.optim.Optimizer | None = None, step: int = 0, policy_version: int = 0,
                 ranks: RankInfo | None = None, forward_module: nn.Module | None = None,
                 on_micro_batch: Callable[[MicroBatchProgress], None] | None = None) -> None:
        self.model = model.to(device)
        self.model.eval()  # no dropout in RL updates (as veRL); gradients still flow
        self.forward_module = forward_module if forward_module is not None else self.model
        self.ranks = ranks
        self.settings = settings
        self.pad_id = pad_id
        self.device = device
        self.bf16 = bf16_autocast(settings, device)
        """Forward passes under bf16 autocast (services.settings: trainer_bf16, trainer_bf16_cpu)."""
        self.optimizer = optimizer or make_optimizer(self.model, settings)
        self.step = step
        self.policy_version = policy_version
        self.on_micro_batch = on_micro_batch

    def advantages(self, episodes: Sequence[Episode]) -> torch.Tensor:
        """Eq 8 advantages [B], normalised within each (task type x role) group of this batch (settings:
        trr_statistics)."""
        return trr_advantages(episodes, self.settings.trr_statistics)

    def micro_batches(self, episodes: Sequence[Episode]) -> list[MicroBatch]:
        """The batch as length-grouped micro-batches with TRR++ advantages attached."""
        return build_micro_batches(episodes, self.advantages(episodes), pad_id=self.pad_id,
                                   micro_batch_size=self.settings.micro_batch_size,
                                   micro_batch_tokens=self.settings.micro_batch_tokens)

    def update(self, episodes: Sequence[Episode], *, stale_dropped: int = 0) -> UpdateReport:
        """Train on ``episodes`` (already filtered for staleness): ``ppo_epochs`` AdamW steps; returns the report.

        Under torchrun every rank calls this with the same batch: rank 0 first announces it to the others."""
        if not episodes:
            raise ValueError("update needs at least one episode")
        if self.ranks is not None and self.ranks.is_main:
            announce(self.ranks, UpdateCommand(episodes=list(episodes), stale_dropped=stale_dropped))
        s = self.settings
        reset_peak_memory(self.device)
        started = time.perf_counter()
        advantages = self.advantages(episodes)
        policy_loss = PolicyLoss.from_settings(s)
        loss_weights = policy_loss.episode_weights(episodes)  # the whole batch's, whichever rows are forwarded
        signal_rows = [i for i, advantage in enumerate(advantages.tolist()) if advantage != 0.0]
        stepping = bool(signal_rows) or not s.skip_zero_advantage_batches
        # With no entropy bonus a zero-advantage episode adds exactly 0 to the loss and its gradient (every Eq 9 term
        # is A x something): only the others go through the model, over the whole batch's token count.
        rows = signal_rows if s.entropy_coef == 0.0 and signal_rows else None
        micro_batches = (build_micro_batches(episodes, advantages, pad_id=self.pad_id,
                                             micro_batch_size=s.micro_batch_size,
                                             micro_batch_tokens=s.micro_batch_tokens, rows=rows)
                         if stepping else [])
        trained = sum(mb.rows for mb in micro_batches)
        share = (whole_batch(len(micro_batches)) if self.ranks is None
                 else rank_share(len(micro_batches), self.ranks.rank, self.ranks.world_size) if micro_batches
                 else whole_batch(0))
        stats = AccumulatedStats(tokens=response_tokens_of(episodes))
        first_epoch = stats
        grad_norm = 0.0
        for epoch in range(s.ppo_epochs if micro_batches else 0):
            self.optimizer.zero_grad(set_to_none=True)
            stats = accumulate_gradients(self.forward_module, micro_batches, policy_loss=policy_loss,
                                         loss_weights=loss_weights, entropy_coef=s.entropy_coef,
                                         device=self.device, bf16=self.bf16,
                                         temperature=s.temperature, share=share,
                                         chunk_tokens=s.logprob_chunk_tokens, token_count=stats.tokens,
                                         on_micro_batch=self.on_micro_batch, prompt_gradient=s.prompt_gradient)
            if epoch == 0:
                first_epoch = stats
            norm = torch.nn.utils.clip_grad_norm_(self.model.parameters(), s.grad_clip)
            grad_norm = grad_norm_value(norm)
            self.optimizer.step()
        if not stepping:
            log.info("update skipped: every advantage of the %d episodes is 0 (skip_zero_advantage_batches)",
                     len(episodes))
        self.optimizer.zero_grad(set_to_none=True)
        if self.ranks is not None:
            stats = reduce_stats(stats, self.ranks)
            first_epoch = stats if s.ppo_epochs == 1 else reduce_stats(first_epoch, self.ranks)
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        elapsed = time.perf_counter() - started
        self.step += 1
        report = self._report(episodes, stats=stats, first_epoch=first_epoch, grad_norm=grad_norm,
                              micro_batches=len(micro_batches), signal_episodes=len(signal_rows), trained=trained,
                              stale_dropped=stale_dropped, elapsed=elapsed)
        log.info("update step=%d episodes=%d loss=%.4f grad_norm=%.3f tokens/s=%.1f", report.step, report.episodes,
                 report.loss, report.grad_norm, report.tokens_per_s)
        return report

    def _report(self, episodes: Sequence[Episode], *, stats: AccumulatedStats, first_epoch: AccumulatedStats,
                grad_norm: float, micro_batches: int, signal_episodes: int, trained: int, stale_dropped: int,
                elapsed: float) -> UpdateReport:
        """The update's report: the last epoch's loss and diagnostics (``stats``), the first epoch's engine/trainer
        mismatch and importance weights (``first_epoch``), throughput and memory."""
        s = self.settings
        mismatch_tokens = first_epoch.mismatch_tokens
        memory, kind = peak_memory_mb(self.device)
        tokens = max(stats.trained_tokens, 1)  # the diagnostics' means cover the episodes that went through
        return UpdateReport(
            step=self.step, policy_version=self.policy_version, episodes=len(episodes), stale_dropped=stale_dropped,
            micro_batches=micro_batches, ppo_epochs=s.ppo_epochs, loss=stats.loss, pg_loss=stats.pg_loss,
            entropy=stats.entropy_sum / tokens, clip_fraction=stats.clip_sum / tokens,
            approx_kl=stats.kl_sum / tokens, ratio_max=stats.ratio_max, grad_norm=grad_norm, tokens=stats.tokens,
            padded_tokens=stats.padded_tokens,
            tokens_per_s=stats.trained_tokens * s.ppo_epochs / max(elapsed, 1e-9),
            step_time_s=elapsed, peak_memory_mb=memory, memory_kind=kind, groups=group_stats(episodes),
            logprob_mismatch_tokens=mismatch_tokens,
            logprob_mismatch_abs=first_epoch.mismatch_abs_sum / mismatch_tokens if mismatch_tokens else None,
            logprob_mismatch_kl=first_epoch.mismatch_kl_sum / mismatch_tokens if mismatch_tokens else None,
            is_capped_fraction=(first_epoch.is_capped_tokens / first_epoch.is_weighted_tokens
                                if first_epoch.is_weighted_tokens else None),
            signal_episodes=signal_episodes, trained_episodes=trained,
            optimizer_steps=s.ppo_epochs if micro_batches else 0,
        )


def make_optimizer(model: nn.Module, settings: TrainerSettings) -> torch.optim.AdamW:
    """AdamW over every trainable parameter: constant lr, betas (0.9, 0.999), the settings' weight decay."""
    params = [p for p in model.parameters() if p.requires_grad]
    return torch.optim.AdamW(params, lr=settings.learning_rate, betas=(0.9, 0.999),
                             weight_decay=settings.weight_decay)
