"""What one trainer update reports (`UpdateReport`: logged as JSON, returned to the service loop and the CLI), and
what the self-play loop's in-process trainer returns for a step (`StepUpdate`, `PolicyUpdater.update_on`)."""

from __future__ import annotations

from pydantic import BaseModel, Field

UPDATE_REPORT_SCHEMA_VERSION = 4
"""Bumped whenever UpdateReport's fields change (2: engine/trainer log-prob mismatch; 3: signal, trained episodes
and optimizer steps; 4: the share of importance weights at their cap)."""

MetricValue = int | float | str | bool | None
"""One value of a step's metrics line (JSON scalars)."""


class GroupStats(BaseModel):
    """Reward summary of one (task type x role) group of the batch."""

    task_type: str
    role: str
    count: int
    reward_mean: float


class UpdateReport(BaseModel):
    """Losses, PPO diagnostics, throughput and memory of one update (all PPO epochs of one batch); the loss and PPO
    diagnostics are those of the last epoch, token-means over the whole batch (sums over the trained episodes only:
    with entropy 0 the zero-advantage ones are not forwarded, so entropy, clip and KL cover the others; all 0 for a
    skipped batch)."""

    schema_version: int = UPDATE_REPORT_SCHEMA_VERSION
    step: int = Field(description="trainer step after this update (1 for the first update)")
    policy_version: int = Field(description="policy version of the weights the batch was trained from")
    episodes: int
    stale_dropped: int = 0
    micro_batches: int
    ppo_epochs: int
    loss: float
    pg_loss: float
    entropy: float
    clip_fraction: float
    approx_kl: float
    ratio_max: float
    grad_norm: float = Field(description="global gradient norm before clipping (last epoch)")
    tokens: int = Field(description="response (loss) tokens of the batch")
    padded_tokens: int = Field(description="input positions processed per epoch, padding included (a prompt "
                               "shared by rows counted once when prompts run without autograd)")
    tokens_per_s: float = Field(description="trained loss tokens x epochs per second of update time")
    step_time_s: float
    peak_memory_mb: float = Field(description="CUDA: max allocated in this update; CPU: the process's peak RSS")
    memory_kind: str = Field(description="'cuda_max_allocated' or 'cpu_peak_rss'")
    groups: list[GroupStats]
    logprob_mismatch_tokens: int = Field(0, description="response tokens that carried the engine's log-prob")
    logprob_mismatch_abs: float | None = Field(
        None, description="mean |log π_engine − log π_trainer| over those tokens, before the update (None: none)")
    logprob_mismatch_kl: float | None = Field(
        None, description="k3 estimate of KL(π_engine || π_trainer) per token over those tokens, before the update")
    is_capped_fraction: float | None = Field(
        None, description="share of the trained tokens with an engine log-prob whose truncated importance weight "
        "min(π_old / π_engine, behaviour_is_cap) hit the cap, first epoch (None: no weighting)")
    signal_episodes: int = Field(0, description="episodes whose Eq 8 advantage is nonzero")
    trained_episodes: int = Field(
        0, description="episodes forwarded and backpropagated: all, or with entropy 0 only the signal_episodes")
    optimizer_steps: int = Field(
        0, description="AdamW steps made: ppo_epochs, or 0 for a batch skipped by skip_zero_advantage_batches")


class StepUpdate(BaseModel):
    """What the in-process trainer did with one step's episodes (`PolicyUpdater.update_on`)."""

    policy_version: int = Field(description="the policy version after the update (unchanged when none was made)")
    duplicates_skipped: int = Field(0, description="episodes of this call already trained on (redelivered)")
    report: UpdateReport | None = Field(None, description="the update's report; None when nothing was trained")
    weights: str | None = Field(None, description="where the update's weights were pushed from")
    checkpoint: str | None = Field(None, description="the full checkpoint written with this update, if one was due")

    def metrics(self) -> dict[str, MetricValue]:
        """The flat scalars of the step's `train/...` metrics: the duplicates, the report's fields (its groups
        apart), the weights and checkpoint paths, with `policy_version` the version after the update."""
        line: dict[str, MetricValue] = {"duplicates_skipped": self.duplicates_skipped}
        if self.report is not None:
            line.update(self.report.model_dump(exclude={"groups"}))
            line["weights"] = self.weights
            if self.checkpoint is not None:
                line["checkpoint"] = self.checkpoint
        line["policy_version"] = self.policy_version
        return line
