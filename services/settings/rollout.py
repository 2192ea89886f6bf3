"""Self-play's side of the algorithm (paper Table 3 and the reading and reward levers): sizes, sampling, rewards,
seeding and staleness."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

from pydantic import Field

from services.settings.section import SettingsSection


class RolloutSettings(SettingsSection):
    """What one self-play step proposes, solves and rewards, how the buffers are seeded, and how far generation may
    run ahead of training."""

    RESUMED: ClassVar[frozenset[str]] = frozenset({
        "batch_size", "references_k", "learnability_samples", "seed_multiplier", "induction_inputs", "buffer_cap",
        "temperature", "top_p", "max_prompt_tokens", "max_response_tokens", "unlearnable_proposal_reward",
        "induction_gold_imports", "seed_max_rounds"})

    batch_size: int = Field(64, ge=1)
    """B: tasks per (task type x role) per step; a step trains on 6·B sequences."""
    references_k: int = Field(6, ge=0)
    """K: reference triplets shown to the deduction/abduction proposer."""
    learnability_samples: int = Field(8, ge=1)
    """n: solver samples per proposal to estimate its learnability (Eq 4), at the rollout temperature."""
    seed_multiplier: int = Field(4, ge=1)
    """S: buffers are seeded with B·S triplets (and B·S induction tasks) before training."""
    induction_inputs: int = Field(10, ge=2)
    """N: inputs an induction proposal writes; the solver sees the first N//2 pairs."""
    determinism_runs: int = Field(2, ge=2)
    """j: independent runs (fresh processes, different hash seeds) a program must agree on."""
    buffer_cap: int = Field(16_384, ge=1)
    """Programs kept per buffer; the oldest non-seed entries are evicted beyond it."""
    temperature: float = Field(1.0, gt=0)
    """Sampling temperature for rollouts and learnability samples."""
    top_p: float = Field(1.0, gt=0, le=1)
    """Nucleus sampling threshold."""
    max_prompt_tokens: int = Field(6144, ge=16)
    """Longest prompt, in tokens."""
    max_response_tokens: int = Field(8096, ge=1)
    """Longest response, in tokens (paper: 8096)."""
    unlearnable_proposal_reward: float = Field(0.0, ge=-1, le=0)
    """Reward of a valid, well-formed proposal the solver always or never solves (r̄ ∈ {0, 1}): 0 (the paper's Eq 4)
    or −0.5 (the released code's reward manager; its issue #37)."""
    solve_samples_per_task: int = Field(1, ge=1)
    """Solver samples per task of the solve batch (the paper: 1, each of the B tasks answered once). With k > 1 the
    B x k answers of a task type form its TRR++ group as before, but each task's k answers are compared with one
    another: a task the policy solves sometimes gives a spread that comes from correctness, not from format. A
    departure (the self-play issue's signal levers: docs/runs/), off in configs/paper.toml and authors-code.toml."""
    solver_wrong_answer_reward: float = Field(-0.5, ge=-1, le=0)
    """Eq 6's reward of a well-formed wrong answer: −0.5 (the paper). −1 makes it equal to a format error, so a solve
    group's rewards spread only where an answer is right: on a small model most spreads were format-only (−1 against
    −0.5) and earned the same ±1 advantage as a right answer (docs/runs/learn-cpu). A departure, off in
    configs/paper.toml and authors-code.toml."""
    proposer_invalid_task_reward: float = Field(-1.0, ge=-1, le=0)
    """Reward of a proposal with the right template and a task to validate that the executor rejects: −1 (the paper,
    §3.1: for the proposer only a valid triplet counts as well formed). Above −1 it pays for writing a task at all,
    so a model that writes almost no valid task still gets a proposer gradient. A departure, off in
    configs/paper.toml and authors-code.toml."""
    induction_gold_imports: bool = False
    """Induction answer checks prepend the gold program's import lines to the solver's program before the hidden
    inputs run (the released code does); off, a hidden input or program using an imported name fails unless the
    solver imports it (the paper does not say)."""
    max_staleness: int = Field(1, ge=0)
    """Episodes generated more than this many policy versions ago are dropped by the trainer (the paper and the
    released code are synchronous, i.e. 0; 1 lets generation run one version ahead of training)."""
    seed_max_rounds: int = Field(50, ge=0)
    """Buffer seeding proposes until each buffer holds B·S entries (§3.3.1), giving up after this many propose rounds
    per phase (a weak model may never get there; the run then goes on with what it has, and says so)."""
    reject_multiple_functions: bool = True
    """Reading rule for deduction/abduction proposals: refuse a program with more than one `def` (nested and class
    methods included), as the authors' Qwen scripts do; off, the first `def` is renamed to `f`
    (docs/reading-rules.md)."""
    seed_files: list[Path] = Field(default_factory=list)
    """Seed JSONL files (the authors' seed format or `azr validate` rows) imported into the buffers, validated by the
    executor, before a new run seeds with the model."""
    coordinator_executor_parallelism: int = Field(8, ge=1)
    """Executor calls (validations, answer checks) the coordinator keeps in flight while it generates."""
