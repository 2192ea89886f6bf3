"""One typed settings object for every service and the CLI (environment prefix `AZR_`).

Two profiles share one code path (docs/design.md §4):
- `embedded`: one process, SQLite file, in-process queue, process sandbox, local CPU model. Sizes shrink
  (e.g. B = 2, short responses); the algorithm does not.
- `distributed`: Redis, PostgreSQL, SGLang servers, Docker sandbox. The paper's constants (Table 3) are its defaults.

Layers, highest first: a command-line flag (keyword), an `AZR_<FIELD>` environment variable, a TOML config file
(`--config FILE` or `AZR_CONFIG`; services/config_file.py), the profile's default, the field's default. A field set in
any of the first three always wins over the profile's default.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal
from urllib.parse import quote, unquote_plus

from pydantic import Field, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from services.profile_defaults import (
    PROFILE_DEFAULTS,
    default_eval_data,
    default_executor_python,
)

Profile = Literal["embedded", "distributed"]

DEFAULT_API_TOKEN = "change-me"
"""The placeholder token; services of the distributed profile refuse to start with it."""


class Settings(BaseSettings):
    """Resolved configuration of one AZR deployment or run."""

    model_config = SettingsConfigDict(
        env_prefix="AZR_",
        use_attribute_docstrings=True,
        extra="forbid",
        validate_default=True,
    )

    # --- run ---------------------------------------------------------------------------------------------------------
    profile: Profile = "embedded"
    """Deployment profile: `embedded` (one process, no servers) or `distributed` (Redis, Postgres, SGLang, Docker)."""
    run_id: str = Field("default", pattern=r"^[A-Za-z0-9_.-]{1,64}$")
    """Name of the run; prefixes Redis keys (`azr:{run_id}:…`) and names the run directory."""
    run_root: Path = Path("runs")
    """Directory holding one sub-directory per run (resolved settings, metrics JSONL, checkpoints)."""
    seed: int = 0
    """Seed for sampling references, batches and generation."""
    steps: int = Field(1, ge=0)
    """Self-play steps (the paper's Table 3: 500; the released scripts: 960). `azr run` performs this many (with
    --resume, this many more); `azr coordinator` runs the run up to this step in total (a restart never overshoots)."""

    # --- storage and queues ------------------------------------------------------------------------------------------
    database_url: str = ""
    """SQLAlchemy URL of the buffer store: SQLite (embedded) or PostgreSQL via psycopg 3 (distributed)."""
    database_password: SecretStr | None = None
    """Password put into `database_url` when set (issue 37: deployments pass it as a secret file,
    /run/secrets/azr_database_password, never in an environment variable or a command line)."""
    redis_password: SecretStr | None = None
    """Password put into `redis_url` when set (issue 37: a secret file, /run/secrets/azr_redis_password, in Compose
    and Kubernetes)."""
    redis_url: str = "redis://127.0.0.1:6379/0"
    """Redis URL for RQ executor jobs and the episode stream (distributed profile)."""
    redis_outage_s: float = Field(60.0, ge=0)
    """How long the coordinator and the trainer ride through a Redis outage (a restart): each call is retried with
    backoff and a log line, and fails with Redis's error only once the outage has lasted this long (0: at once)."""
    database_outage_s: float = Field(60.0, ge=0)
    """How long the coordinator and the embedded run ride through a database outage (a PostgreSQL restart): each
    store operation is retried with backoff and a log line, and fails with the database's error only once the
    outage has lasted this long (0: one immediate retry). The APIs never wait: they answer 503 at once."""
    rollout_api_outage_s: float = Field(120.0, ge=0)
    """How long the distributed coordinator rides through its proposer or solver API being unreachable or answering
    502/503/504 (the API, or the inference server behind it, restarting and loading its model): each request is
    retried with backoff (1 s doubling to 10 s) and a log line, and the step fails only once this long has passed."""
    queue_backend: Literal["inprocess", "redis"] = "inprocess"
    """Where executor jobs and episodes travel: an in-process queue or Redis (RQ + a stream)."""
    episode_claim_after_s: float = Field(60.0, gt=0)
    """An episode read but not acknowledged for this long is redelivered to another trainer consumer."""
    applied_log_ttl_s: int = Field(7 * 24 * 3600, ge=1)
    """Expiry of the trainer's per-step sets of applied episode ids (Redis), refreshed on every write."""

    # --- HTTP services -----------------------------------------------------------------------------------------------
    api_token: SecretStr = SecretStr(DEFAULT_API_TOKEN)
    """Bearer token required by write routes; every command that serves or sends it refuses the placeholder."""
    max_request_bytes: int = Field(262_144, gt=0)
    """Largest request body the APIs accept (413 above it)."""
    proposer_url: str = "http://127.0.0.1:8001"
    """Base URL of proposer_api, for the coordinator."""
    solver_url: str = "http://127.0.0.1:8002"
    """Base URL of solver_api, for the coordinator."""
    seed_submission_quota: int = Field(1024, ge=0)
    """Entries with source `user` (POST /v1/seeds) a buffer may hold; past it the route answers 409. Source: issue
    37 (a token holder must not be able to fill a buffer); submissions are evicted like proposals."""

    # --- inference ---------------------------------------------------------------------------------------------------
    inference_backend: Literal["local", "sglang"] = "local"
    """Local transformers engine (embedded) or SGLang servers over HTTP (distributed)."""
    model: str = "qwen-coder-0.5b"
    """Model: a preset (`qwen-coder-0.5b`, `smollm2`, `tiny`), a Hugging Face hub id (`Org/Name`, read offline from
    the local HF cache: HF_HUB_CACHE, else HF_HOME/hub), or a path to a Hugging Face model directory."""
    sglang_urls: list[str] = Field(default_factory=lambda: ["http://127.0.0.1:30000"])
    """SGLang server (or router) base URLs; requests are load-balanced across them."""
    sglang_request_timeout_s: float = Field(600.0, gt=0)
    """HTTP timeout of one `/generate` request, i.e. one chunk of `sglang_max_rows_per_request` samples; a chunk that
    times out is resent alone (up to the client's retries), never the whole batch."""
    sglang_max_rows_per_request: int = Field(64, ge=1)
    """Most samples (rows: prompts x n) one `/generate` request carries: a batch is split into chunks of this many,
    so a timeout, a 5xx or a restarted server costs one chunk, and the chunks spread over the servers."""
    sglang_max_concurrent_requests: int = Field(16, ge=1)
    """`/generate` requests one generate call keeps in flight at once, round-robin over the healthy servers (SGLang
    batches concurrent requests continuously, so this feeds every server without sending one huge request)."""
    sglang_admin_api_key: SecretStr | None = None
    """The servers' `--admin-api-key`: SGLang then accepts its control endpoints (update_weights_from_disk,
    pause_generation, continue_generation, flush_cache, abort_request) only with `Authorization: Bearer <key>`, which
    the trainer sends; generation and /model_info stay open. None: servers started without one."""
    sglang_resume_aborted: bool = True
    """Resume samples a weight push aborted (AReaL's partial rollouts) instead of starting them again: the client
    re-posts prompt + the tokens generated so far with `max_new_tokens` reduced, and joins the pieces into one sample
    tagged with the OLDEST weight version it contains. Why this is sound: the trainer recomputes pi_old with its own
    weights, so a sample spanning two policy versions is still a valid (near on-policy) sample, and its oldest
    version keeps the staleness filter conservative; off, every push throws away the tokens in flight."""
    sglang_max_resumes: int = Field(3, ge=0)
    """Most times one sample is resumed; aborted once more, it starts again from its prompt (the behaviour with
    `sglang_resume_aborted` off)."""
    device: str = "auto"
    """Torch device for the local engine and trainer: `auto` (CUDA if present), `cpu`, `cuda`, `cuda:N`."""
    local_engine_dtype: Literal["auto", "float32", "bfloat16"] = "auto"
    """Weights dtype of the local engine (generation only; the trainer keeps float32 weights and recomputes π_old, so
    the loss does not depend on it): `auto` = bfloat16 on CUDA and on CPUs with native bf16 (AVX512-BF16/AMX: ~2.2x
    faster prefill, 1.1-1.4x faster decoding on 2 cores, docs/benchmarks.md), float32 on other CPUs (emulated bf16
    is slower). AZR_CPU_NATIVE_BF16=1/0 makes any CPU take either path."""
    behaviour_is_cap: float = Field(0.0, ge=0)
    """Truncated importance sampling of the engine/trainer mismatch (not in the paper; veRL's `tis_imp_ratio_cap`):
    each token's loss is weighted by min(π_old / π_engine, cap), so an update from tokens another engine sampled
    (int8 or bf16 weights) is the policy gradient of the trainer's policy. 0: off (the paper, the released code);
    the learning preset, whose engine is int8 (per-token mean |log π_old − log π_engine| ~0.2-0.3), uses 2."""
    local_engine_int8: bool = False
    """CPU only: the local engine generates with its Linear layers quantized to int8 (weights per tensor, activations
    per batch, torch's dynamic quantization), on top of `local_engine_dtype` float32. Decoding is matrix products,
    and int8 ones run several times faster on CPUs without native bf16 (docs/benchmarks.md, bench/step_generation.py);
    the sampled tokens come from another distribution (KL ~0.002 nats at the argmax, but a mean |Δ log p| of 0.18-0.3
    per sampled token on the default model): the trainer recomputes π_old with its float32 weights, and
    `behaviour_is_cap` corrects the update for the mismatch. Off by default; the learning preset turns both on."""
    local_engine_int8_keep_float: list[str] = Field(default_factory=list)
    """With `local_engine_int8`: Linear layers whose names end in one of these (at a dot) stay float32, e.g.
    `["down_proj"]` or one layer's `["layers.2.mlp.down_proj"]`. The MLP down projections' inputs carry the model's
    few huge activations, and dynamic quantization takes one activation scale per batch: on the default model's own
    sampled tokens every Linear int8 is 0.64-0.80 nats per token from float32, 0.23 with every `down_proj` float32
    and 0.29 with the 8 most outlying of 24; the LM head makes no difference (bench/engine_gap.py ranks the
    layers)."""
    local_engine_int8_per_channel: bool = False
    """With `local_engine_int8`: one int8 scale per output channel of each weight instead of one per tensor (torch's
    `per_channel_dynamic_qconfig`); activations stay one scale per batch. Measured on the default model's own sampled
    tokens in docs/benchmarks.md (bench/engine_gap.py --per-channel)."""
    torch_threads: int = Field(0, ge=0)
    """Threads torch uses on the CPU in this process (inference and updates); N > 0 fixes it. 0: in the embedded run
    every core while no sandbox job runs (each update, most of generation) and one per core the executor's workers
    leave (at least one) while one does, because torch's spinning threads beside busy workers run several times
    slower (docs/benchmarks.md, embedded profile); in other processes always the latter rule."""
    local_engine: Literal["auto", "torch", "llama-cpp"] = "torch"
    """Which in-process engine generates (`inference_backend = local`): `llama-cpp` (llama.cpp's quantized CPU kernels
    through llama-cpp-python, services/inference/llama_cpp_engine.py: the released 4-bit weights, 0.012 nats per token
    from the trainer's float32 against the int8 torch engine's 0.12; docs/embedded-run.md), `torch` (transformers,
    services/inference/local_engine.py: CUDA, and the fallback), or `auto`: llama.cpp on a CPU where llama-cpp-python is
    installed (`make engine`), else torch, saying why. Not in the paper (its engine is vLLM on GPUs). The embedded
    profile defaults to `auto`."""
    llama_cpp_base: Literal["release", "q8_0", "q4_0", "f16"] = "release"
    """How the llama.cpp engine holds the base model: `release` = the model's GGUF as shipped (Q4_K_M; the trainer's
    base is its exact dequantization, so the engine/trainer gap is the kernels' rounding only), or requantized once
    to `q8_0` / `q4_0` / `f16` (other speed, more gap: docs/benchmarks.md, bench/engine_compare.py). Models without a
    GGUF release are written in float32 from their HF directory."""
    llama_cpp_context_tokens: int = Field(65536, ge=256)
    """KV cache cells of the llama.cpp engine in all: each row of a batch gets a stream of (its wave's longest prompt +
    max_new_tokens) cells, and rows that do not fit are decoded in later waves. 65,536 cells: 0.8 GB (0.5B) / 1.8 GB
    (1.5B) at most."""
    llama_cpp_sequences: int = Field(64, ge=1, le=256)
    """Most rows (samples) the llama.cpp engine decodes together (llama.cpp's limit: 256)."""

    # --- executor ----------------------------------------------------------------------------------------------------
    executor_backend: Literal["process", "docker"] = "process"
    """Sandbox: forked workers (bubblewrap where available) or hardened long-lived Docker containers."""
    executor_workers: int = Field(2, ge=1)
    """Long-lived sandbox workers per executor process."""
    executor_timeout_s: float = Field(10.0, gt=0)
    """Wall-clock limit per program run (paper: 10 s)."""
    executor_memory_mb: int = Field(1024, ge=64)
    """Address-space limit per program run, MiB."""
    executor_max_output_bytes: int = Field(65_536, gt=0)
    """Largest repr of a program's result; longer is `output_too_large` (the authors truncate at 400 chars)."""
    executor_max_processes: int = Field(64, ge=1)
    """Process/thread cap for one task (Docker pids-limit; RLIMIT_NPROC in the process sandbox)."""
    executor_sandbox: Literal["auto", "bwrap", "rootless", "none"] = "auto"
    """Process backend isolation: `auto` (bubblewrap, else the rootless namespace sandbox, else refuse to start and
    name the install command), `bwrap` or `rootless` (that one, required), `none` (rlimits only: model code runs
    unconfined; every log line and /readyz say so). Source: issue 37, docs/isolation.md."""
    executor_python: str = Field(default_factory=default_executor_python)
    """Absolute interpreter path for sandbox workers (never the PATH shim; the worker is stdlib-only)."""
    executor_recycle_after: int = Field(1000, ge=1)
    """Replace a worker after this many tasks (a crash replaces it at once)."""
    executor_queue: str = Field("executor", pattern=r"^[A-Za-z0-9_.:-]{1,128}$")
    """RQ queue executor jobs travel on (distributed profile); `azr worker executor` serves it by default."""
    executor_docker_image: str = "azr-executor:1"
    """Image the Docker backend runs its workers in (build offline with executor_svc/image/build_offline.sh)."""

    # --- algorithm (paper Table 3) -----------------------------------------------------------------------------------
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
    learning_rate: float = Field(1e-6, gt=0)
    """AdamW learning rate, constant."""
    grad_clip: float = Field(1.0, gt=0)
    """Gradient-norm clip."""
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
    ppo_epochs: int = Field(1, ge=1)
    """PPO epochs per batch."""
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

    # --- trainer -----------------------------------------------------------------------------------------------------
    weight_decay: float = Field(0.01, ge=0)
    """AdamW decoupled weight decay; 0.01 is what the authors' paper-branch veRL ran with (its code default)."""
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
    trainer_bf16: bool = True
    """Run the trainer's forward passes under bf16 autocast on CUDA (fp32 master weights); see `trainer_bf16_cpu`."""
    trainer_bf16_cpu: bool = False
    """Also on a CPU with native bf16 (AVX512-BF16/AMX; elsewhere ignored: emulated bf16 is slower than float32).
    The embedded profile turns it on: an update of the default model ran 1.66x faster on 2 such cores
    (docs/benchmarks.md)."""
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

    # --- Prometheus metrics of the processes without an HTTP app (the APIs serve /metrics on their own port) ---------
    run_api_port: int = Field(8001, ge=0, le=65535)
    """`azr run` only: loopback port of the run's own proposer API (buffers, seeds, `/dashboard`, `/metrics` with the
    coordinator's and executor's metrics); 0 = off. A busy port is reported and the run goes on without it."""
    coordinator_metrics_port: int = Field(0, ge=0, le=65535)
    """Port of `azr coordinator`'s Prometheus endpoint (`/metrics`); 0 = off."""
    trainer_metrics_port: int = Field(0, ge=0, le=65535)
    """Port of `azr trainer`'s Prometheus endpoint (`/metrics`); 0 = off."""
    executor_metrics_port: int = Field(0, ge=0, le=65535)
    """Port of each `azr worker executor` process's Prometheus endpoint (`/metrics`); 0 = off."""
    metrics_address: str = "0.0.0.0"
    """Address those metrics endpoints bind to (all interfaces by default, so Prometheus can reach the pod)."""

    # --- evaluation (paper App. C.2: CRUXEval-O = deduction, CRUXEval-I = abduction; `azr eval cruxeval`) -----------
    eval_every_steps: int = Field(0, ge=0)
    """Evaluate CRUXEval-O and -I (greedy, our solver prompts and executor checks) after every k-th self-play step,
    writing `eval/cruxeval_o`, `eval/cruxeval_i` and their `/count` into that step's metrics line; 0 = off (the
    default in both profiles: it costs 2 × `eval_limit` greedy generations each time)."""
    eval_limit: int = Field(200, ge=0)
    """Rows of `eval_data` per split that the periodic evaluation uses: the first ones of the file, the same every
    time, so steps compare; 0 = all rows."""
    eval_data: Path = Field(default_factory=default_eval_data)
    """CRUXEval-format JSONL (`code`, `input`, `output`, `id` per line) for the periodic evaluation; read when the
    coordinator starts (a missing or malformed file stops it there, naming the line)."""

    # --- experiment tracking (every metrics line, beside metrics.jsonl; services/reporting/metric_sinks.py) ----------
    tensorboard: bool = True
    """Also write every metrics line's numeric values as TensorBoard scalars (step = the line's step) to
    `<run_dir>/tensorboard/` (`azr run`, `azr coordinator`); view with `tensorboard --logdir runs`."""
    wandb: bool = False
    """Also log every metrics line to Weights & Biases (`wandb.log`, step = the line's step) when the `wandb` package
    is installed; without it the run says so once and goes on. wandb's own variables apply (WANDB_MODE=offline...)."""
    wandb_project: str = "azr"
    """Weights & Biases project the runs are logged to (the run's name is `run_id`)."""

    @classmethod
    def settings_customise_sources(cls, settings_cls: type[BaseSettings], init_settings: PydanticBaseSettingsSource,
                                   env_settings: PydanticBaseSettingsSource,
                                   dotenv_settings: PydanticBaseSettingsSource,
                                   file_secret_settings: PydanticBaseSettingsSource,
                                   ) -> tuple[PydanticBaseSettingsSource, ...]:
        """Keywords (flags) > AZR_* environment > the TOML config file in effect; profile defaults fill the rest."""
        from services.config_file import ConfigFileSource

        return init_settings, env_settings, dotenv_settings, ConfigFileSource(settings_cls), file_secret_settings

    @model_validator(mode="before")
    @classmethod
    def _apply_profile_defaults(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        profile = data.get("profile", "embedded")
        for key, value in PROFILE_DEFAULTS.get(str(profile), {}).items():
            data.setdefault(key, value)
        return data

    @model_validator(mode="after")
    def _put_passwords_into_urls(self) -> Settings:
        """`database_password` / `redis_password` (from secret files) complete their URLs."""
        if self.database_password is not None and self.database_url:
            self.database_url = url_with_password(self.database_url, self.database_password.get_secret_value())
        if self.redis_password is not None:
            self.redis_url = url_with_password(self.redis_url, self.redis_password.get_secret_value())
        return self

    @field_validator("clip_ratio_c")
    @classmethod
    def _dual_clip_is_off_or_above_one(cls, value: float) -> float:
        if value != 0.0 and value <= 1.0:
            raise ValueError("the dual clip must be 0 (off) or > 1 (it caps the loss at −A·c for A < 0)")
        return value

    @property
    def run_dir(self) -> Path:
        """This run's directory: resolved settings, metrics, checkpoints."""
        return self.run_root / self.run_id

    def uses_default_secret(self) -> bool:
        """Whether the API token is unset or the placeholder."""
        token = self.api_token.get_secret_value()
        return token in ("", DEFAULT_API_TOKEN)

    def require_production_secrets(self) -> None:
        """Refuse to serve (or call) the APIs with a default or empty API token, in every profile (issue 37: the
        embedded `azr serve proposer` took `change-me`); `azr run` makes its own token instead."""
        if self.uses_default_secret():
            raise RuntimeError(
                "refusing to start: AZR_API_TOKEN is unset or the placeholder "
                f"{DEFAULT_API_TOKEN!r}; set a secret token, e.g. AZR_API_TOKEN=$(python3 -c 'import secrets; "
                "print(secrets.token_urlsafe(32))')"
            )

    def resolved(self, mask_secrets: bool = True) -> dict[str, Any]:
        """All fields as JSON-ready values; secrets masked unless asked otherwise."""
        values = self.model_dump(mode="json")
        token = self.api_token.get_secret_value()
        if mask_secrets:
            values["api_token"] = "<placeholder: set AZR_API_TOKEN>" if self.uses_default_secret() else "********"
        else:
            values["api_token"] = token
        if not mask_secrets:
            for key in ("sglang_admin_api_key", "database_password", "redis_password"):
                secret = getattr(self, key)
                if secret is not None:
                    values[key] = secret.get_secret_value()
        if mask_secrets:  # every URL field: credentials may sit in any of them (issue 37: sglang_urls)
            for key in values:
                if key.endswith("_url") and isinstance(values[key], str):
                    values[key] = mask_url_password(values[key])
                elif key.endswith("_urls") and isinstance(values[key], list):
                    values[key] = [mask_url_password(str(url)) for url in values[key]]
        return values

    def save_resolved(self, directory: Path | None = None) -> Path:
        """Write the resolved settings (secrets masked) to `settings.json` in the run directory."""
        target_dir = directory or self.run_dir
        target_dir.mkdir(parents=True, exist_ok=True)
        path = target_dir / "settings.json"
        path.write_text(json.dumps(self.resolved(), indent=2, sort_keys=True) + "\n")
        return path


SECRET_QUERY_KEYS = frozenset({"password", "passwd", "pwd", "pass", "secret", "token", "access_token", "api_key",
                               "apikey", "key", "auth", "sslpassword", "sslkey"})
"""Query parameters whose values mask_url_password hides (`?password=...`, as libpq and others accept)."""


def mask_url_password(url: str) -> str:
    """The URL with its secrets replaced by `***`: the password of `scheme://user:secret@host` and the value of every
    query parameter named in SECRET_QUERY_KEYS. Read by parsing: the credentials end at the last `@` before the
    query, so a password holding `@`, `/` or `:` is hidden whole; the user name is kept."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        return url
    rest, mark, query = rest.partition("?")
    if "@" in rest:
        credentials, _, host = rest.rpartition("@")
        user, colon, _ = credentials.partition(":")
        rest = f"{user}:***@{host}" if colon else f"{credentials}@{host}"
    if mark:
        query, hash_mark, fragment = query.partition("#")
        pairs = []
        for pair in query.split("&"):
            name, equals, _ = pair.partition("=")
            pairs.append(f"{name}=***" if equals and unquote_plus(name).lower() in SECRET_QUERY_KEYS else pair)
        query = "&".join(pairs) + hash_mark + fragment
    return f"{scheme}://{rest}{mark}{query}"


def url_with_password(url: str, password: str) -> str:
    """`url` with `password` (URL-quoted) in its credentials: `scheme://user@host` -> `scheme://user:pw@host`."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        return url
    authority, slash, path = rest.partition("/")
    credentials, at, host = authority.rpartition("@")
    user = credentials.partition(":")[0] if at else ""
    return f"{scheme}://{user}:{quote(password, safe='')}@{host}{slash}{path}"


SECRETS_DIR = "/run/secrets"
"""Where Compose and Kubernetes mount secret files; each file named after a setting's variable in lower case
(`azr_api_token`, `azr_redis_password`) is that setting's value, below every other layer. AZR_SECRETS_DIR moves it."""


def load_settings(config_file: Path | None = None, **overrides: Any) -> Settings:
    """Settings from `config_file` (else AZR_CONFIG's file, if any), the environment (`AZR_*`) over it, and explicit
    overrides (flags; None = not given) on top; secret files (SECRETS_DIR) where that directory exists.
    ConfigFileError or pydantic's ValidationError when they do not hold."""
    import os

    from services.config_file import using_config_file

    directory = os.environ.get("AZR_SECRETS_DIR", SECRETS_DIR)
    secrets: dict[str, Any] = {"_secrets_dir": directory} if os.path.isdir(directory) else {}
    with using_config_file(config_file):
        return Settings(**secrets, **{k: v for k, v in overrides.items() if v is not None})
