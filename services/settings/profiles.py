"""Each profile's defaults (docs/design.md §4), the seed files shipped with the package and the defaults that depend on
the machine: what `services.settings.Settings` fills in for fields the user did not set. The one place a profile's
defaults live: a field's own default is the distributed profile's unless `PROFILE_DEFAULTS` says otherwise, and the
example config files only restate these (tests/services/settings/test_config_file.py holds them to it)."""

from __future__ import annotations

import sys
from pathlib import Path


def default_executor_python() -> str:
    """Debian's interpreter starts fast and has no site hooks; fall back to ours elsewhere."""
    return "/usr/bin/python3" if Path("/usr/bin/python3").exists() else sys.executable


def default_eval_data() -> Path:
    """CRUXEval is not shipped (its rows are the benchmark's): by default a `shared/data/cruxeval.jsonl` in the
    directory that holds the checkout, wherever the process was started from; set `AZR_EVAL_DATA` to yours."""
    return Path(__file__).resolve().parents[3] / "shared" / "data" / "cruxeval.jsonl"


PACKAGED_SEED_FILES: tuple[Path, ...] = (
    Path(__file__).resolve().parents[1] / "data" / "seeds" / "7b_coder_seed_io.jsonl",
    Path(__file__).resolve().parents[1] / "data" / "seeds" / "7b_coder_code_f_seed_io.jsonl",
)
"""The authors' published seed triplets and induction tasks (services/data/seeds/README.md, MIT), shipped with the
package: the embedded profile imports them before its first step."""

PROFILE_DEFAULTS: dict[str, dict[str, object]] = {
    "embedded": {
        "database_url": "sqlite:///runs/azr.sqlite3",
        "queue_backend": "inprocess",
        "executor_backend": "process",
        "inference_backend": "local",
        "batch_size": 2,  # a default-model step ~11 min on 2 CPU cores with native bf16 (docs/lab-log.md)
        "max_prompt_tokens": 2048,
        # the default model's step-0 responses: 5% are longer than 1,024 tokens, 14% than 768, 32% than 512
        # (docs/lab-log.md, the step-0 reading rates); a cut response earns the format penalty whatever it would say
        "max_response_tokens": 1024,
        "executor_workers": 2,
        "micro_batch_size": 2,
        "micro_batch_tokens": 4096,
        "gradient_checkpointing": True,
        "trainer_bf16_cpu": True,  # bf16 autocast as on a GPU, where the CPU multiplies bf16 natively
        # Departure from §3.3.1 (the paper seeds with the base model): a 0.5B model writes almost no valid task at
        # step 0, so self-seeding would take hours and store little. `azr run --no-seed-file` restores the paper's way.
        "seed_files": list(PACKAGED_SEED_FILES),
        "checkpoint_every": 1,  # a laptop run resumes from its last step (with LoRA a checkpoint is ~100 MB)
        # Departures from Table 3 (entropy 0.001, every batch steps), for updates that move the policy only on signal:
        # the authors' released code uses entropy 0; then a batch with no nonzero advantage carries no gradient and is
        # skipped, and zero-advantage episodes are left out of the forward pass (exact: docs/design.md §4).
        "entropy_coef": 0.0,
        "skip_zero_advantage_batches": True,
        # llama.cpp's CPU kernels where llama-cpp-python is installed (`make engine`), else the torch engine
        "local_engine": "auto",
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
        "gradient_checkpointing": True,  # 8,096-token responses: activations of one decoder layer, not all of them
        "checkpoint_every": 10,  # the authors checkpoint every 10 steps; bf16 weights are pushed after every update
    },
}
"""Per-profile defaults, applied only to fields the user did not set."""
