"""One typed settings object for every service and the CLI (environment prefix `AZR_`).

Two profiles share one code path (DESIGN.md §4):
- `embedded`: one process, SQLite file, in-process queue, process sandbox, local CPU model. Sizes shrink
  (e.g. B = 2, short responses); the algorithm does not.
- `distributed`: Redis, PostgreSQL, SGLang servers, Docker sandbox. The paper's constants (Table 3) are its defaults.

A field set explicitly (keyword or `AZR_<FIELD>` environment variable) always wins over the profile's default.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, SecretStr, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

Profile = Literal["embedded", "distributed"]

DEFAULT_API_TOKEN = "change-me"
"""The placeholder token; services of the distributed profile refuse to start with it."""


def _default_executor_python() -> str:
    """Debian's interpreter starts fast and has no site hooks; fall back to ours elsewhere."""
    return "/usr/bin/python3" if Path("/usr/bin/python3").exists() else sys.executable


def _default_eval_data() -> Path:
    """CRUXEval beside the repository (`../shared/data/cruxeval.jsonl`), wherever the process was started from."""
    return Path(__file__).resolve().parents[2] / "shared" / "data" / "cruxeval.jsonl"


PROFILE_DEFAULTS: dict[str, dict[str, Any]] = {
    "embedded": {
        "database_url": "sqlite:///runs/azr.sqlite3",
        "queue_backend": "inprocess",
        "executor_backend": "process",
        "inference_backend": "local",
        "batch_size": 2,  # a default-model step ~25-50 min on 2 CPU cores (README); 4 doubles it
        "max_prompt_tokens": 2048,
        "max_response_tokens": 512,
        "executor_workers": 2,
        "micro_batch_size": 2,
        "micro_batch_tokens": 4096,
        "gradient_checkpointing": True,
    },
    "distributed": {
        "database_url": "postgresql+psycopg://postgres@127.0.0.1:5432/azr",
        "queue_backend": "redis",
        "executor_backend": "docker",
        "inference_backend": "sglang",
        "batch_size": 64,
        "max_prompt_tokens": 6144,
        "max_response_tokens": 8096,
        "executor_workers": 4,
    },
}
"""Per-profile defaults, applied only to fields the user did not set."""


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
    """Number of self-play steps `azr run` performs."""

    # --- storage and queues ------------------------------------------------------------------------------------------
    database_url: str = ""
    """SQLAlchemy URL of the buffer store: SQLite (embedded) or PostgreSQL via psycopg 3 (distributed)."""
    redis_url: str = "redis://127.0.0.1:6379/0"
    """Redis URL for RQ executor jobs and the episode stream (distributed profile)."""
    queue_backend: Literal["inprocess", "redis"] = "inprocess"
    """Where executor jobs and episodes travel: an in-process queue or Redis (RQ + a stream)."""
    episode_claim_after_s: float = Field(60.0, gt=0)
    """An episode read but not acknowledged for this long is redelivered to another trainer consumer."""
    applied_log_ttl_s: int = Field(7 * 24 * 3600, ge=1)
    """Expiry of the trainer's per-step sets of applied episode ids (Redis), refreshed on every write."""

    # --- HTTP services -----------------------------------------------------------------------------------------------
    api_token: SecretStr = SecretStr(DEFAULT_API_TOKEN)
    """Bearer token required by write routes; the distributed profile refuses the placeholder."""
    max_request_bytes: int = Field(262_144, gt=0)
    """Largest request body the APIs accept (413 above it)."""
    proposer_url: str = "http://127.0.0.1:8001"
    """Base URL of proposer_api, for the coordinator."""
    solver_url: str = "http://127.0.0.1:8002"
    """Base URL of solver_api, for the coordinator."""

    # --- inference ---------------------------------------------------------------------------------------------------
    inference_backend: Literal["local", "sglang"] = "local"
    """Local transformers engine (embedded) or SGLang servers over HTTP (distributed)."""
    model: str = "qwen-coder-0.5b"
    """Model: `qwen-coder-0.5b`, `smollm2`, `tiny`, or a path to a Hugging Face model directory."""
    sglang_urls: list[str] = Field(default_factory=lambda: ["http://127.0.0.1:30000"])
    """SGLang server (or router) base URLs; requests are load-balanced across them."""
    device: str = "auto"
    """Torch device for the local engine and trainer: `auto` (CUDA if present), `cpu`, `cuda`, `cuda:N`."""

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
    executor_sandbox: Literal["auto", "bwrap", "none"] = "auto"
    """Process backend isolation: `bwrap` (required), `auto` (bubblewrap when usable), `none` (rlimits only)."""
    executor_python: str = Field(default_factory=_default_executor_python)
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
    """Entropy bonus coefficient."""
    clip_eps: float = Field(0.2, gt=0)
    """PPO ratio clip ε (Eq 9)."""
    ppo_epochs: int = Field(1, ge=1)
    """PPO epochs per batch."""
    max_staleness: int = Field(1, ge=0)
    """Episodes generated more than this many policy versions ago are dropped by the trainer."""
    seed_max_rounds: int = Field(50, ge=0)
    """Buffer seeding proposes until each buffer holds B·S entries (§3.3.1), giving up after this many propose rounds
    per phase (a weak model may never get there; the run then goes on with what it has, and says so)."""
    reject_multiple_functions: bool = True
    """Reading rule for deduction/abduction proposals: refuse a program with more than one `def` (nested and class
    methods included), as the authors' Qwen scripts do; off, the first `def` is renamed to `f` (docs/reading-rules.md)."""
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
    micro_batch_tokens: int = Field(0, ge=0)
    """Also cap a micro-batch at this many padded tokens (rows x longest sequence); 0 = no token cap."""
    gradient_checkpointing: bool = False
    """Recompute each decoder layer's activations in the backward pass instead of keeping them: about a third more
    compute, activation memory of one layer instead of all. On in the embedded profile, where a 0.5B model's
    micro-batch of ~2k-token sequences otherwise needs more than a 24 GB machine has."""
    checkpoint_every: int = Field(1, ge=1)
    """Write a checkpoint (and push weights) after every k-th update."""
    keep_checkpoints: int = Field(3, ge=1)
    """Checkpoints kept in the run directory; older ones are deleted after a new one is durable."""
    trainer_bf16: bool = True
    """Run the trainer's forward passes under bf16 autocast on CUDA (fp32 master weights); ignored on CPU."""

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
    eval_data: Path = Field(default_factory=_default_eval_data)
    """CRUXEval-format JSONL (`code`, `input`, `output`, `id` per line) for the periodic evaluation; read when the
    coordinator starts (a missing or malformed file stops it there, naming the line)."""

    @model_validator(mode="before")
    @classmethod
    def _apply_profile_defaults(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        profile = data.get("profile", "embedded")
        for key, value in PROFILE_DEFAULTS.get(str(profile), {}).items():
            data.setdefault(key, value)
        return data

    @property
    def run_dir(self) -> Path:
        """This run's directory: resolved settings, metrics, checkpoints."""
        return self.run_root / self.run_id

    def uses_default_secret(self) -> bool:
        """Whether the API token is unset or the placeholder."""
        token = self.api_token.get_secret_value()
        return token in ("", DEFAULT_API_TOKEN)

    def require_production_secrets(self) -> None:
        """Refuse to serve the distributed profile with a default or empty API token."""
        if self.profile == "distributed" and self.uses_default_secret():
            raise RuntimeError(
                "refusing to start: AZR_API_TOKEN is unset or the placeholder "
                f"{DEFAULT_API_TOKEN!r}; set a secret token for the distributed profile"
            )

    def resolved(self, mask_secrets: bool = True) -> dict[str, Any]:
        """All fields as JSON-ready values; secrets masked unless asked otherwise."""
        values = self.model_dump(mode="json")
        token = self.api_token.get_secret_value()
        if mask_secrets:
            values["api_token"] = "<placeholder: set AZR_API_TOKEN>" if self.uses_default_secret() else "********"
        else:
            values["api_token"] = token
        for key in ("database_url", "redis_url"):
            values[key] = mask_url_password(values[key]) if mask_secrets else values[key]
        return values

    def save_resolved(self, directory: Path | None = None) -> Path:
        """Write the resolved settings (secrets masked) to `settings.json` in the run directory."""
        target_dir = directory or self.run_dir
        target_dir.mkdir(parents=True, exist_ok=True)
        path = target_dir / "settings.json"
        path.write_text(json.dumps(self.resolved(), indent=2, sort_keys=True) + "\n")
        return path


def mask_url_password(url: str) -> str:
    """`scheme://user:secret@host` -> `scheme://user:***@host`; URLs without a password are unchanged."""
    scheme, sep, rest = url.partition("://")
    if not sep or "@" not in rest:
        return url
    credentials, _, host = rest.rpartition("@")
    if ":" not in credentials:
        return url
    user = credentials.split(":", 1)[0]
    return f"{scheme}://{user}:***@{host}"


def load_settings(**overrides: Any) -> Settings:
    """Settings from the environment (`AZR_*`), with explicit overrides on top."""
    return Settings(**{k: v for k, v in overrides.items() if v is not None})
