"""The one settings object: profiles, environment overrides, docstrings, secrets."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import ValidationError

from services.settings import DEFAULT_API_TOKEN, PROFILE_DEFAULTS, Settings, mask_url_password


def test_every_field_has_a_docstring() -> None:
    missing = [name for name, field in Settings.model_fields.items() if not (field.description or "").strip()]
    assert missing == []


def test_distributed_defaults_are_the_paper_constants() -> None:
    settings = Settings(profile="distributed")
    paper_table_3 = {
        "batch_size": 64,
        "references_k": 6,
        "learnability_samples": 8,
        "seed_multiplier": 4,
        "buffer_cap": 16_384,
        "learning_rate": 1e-6,
        "grad_clip": 1.0,
        "entropy_coef": 0.001,
        "ppo_epochs": 1,
        "temperature": 1.0,
        "top_p": 1.0,
        "max_prompt_tokens": 6144,
        "max_response_tokens": 8096,
        "executor_timeout_s": 10.0,
        "clip_ratio_low": 0.2,
        "clip_ratio_high": 0.2,
        "induction_inputs": 10,
        "determinism_runs": 2,
    }
    assert {key: getattr(settings, key) for key in paper_table_3} == paper_table_3
    backends = (settings.queue_backend, settings.executor_backend, settings.inference_backend)
    assert backends == ("redis", "docker", "sglang")
    assert settings.database_url.startswith("postgresql+psycopg://")


def test_embedded_shrinks_sizes_only() -> None:
    embedded, distributed = Settings(profile="embedded"), Settings(profile="distributed")
    assert embedded.batch_size == 2 and embedded.database_url.startswith("sqlite:///")
    backends = (embedded.queue_backend, embedded.executor_backend, embedded.inference_backend)
    assert backends == ("inprocess", "process", "local")
    algorithm = ["references_k", "learnability_samples", "seed_multiplier", "temperature", "clip_ratio_low",
                 "clip_ratio_high", "clip_ratio_c", "loss_agg_mode", "trr_statistics", "unlearnable_proposal_reward",
                 "induction_gold_imports", "determinism_runs"]
    assert [getattr(embedded, k) for k in algorithm] == [getattr(distributed, k) for k in algorithm]
    changed = {k for k in Settings.model_fields if getattr(embedded, k) != getattr(distributed, k)}
    assert changed <= set(PROFILE_DEFAULTS["embedded"]) | {"profile"}


def test_environment_and_keywords_override_profile_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AZR_PROFILE", "distributed")
    monkeypatch.setenv("AZR_BATCH_SIZE", "3")
    monkeypatch.setenv("AZR_SGLANG_URLS", '["http://a:1", "http://b:2"]')
    settings = Settings()
    assert (settings.profile, settings.batch_size, settings.sglang_urls) == ("distributed", 3, ["http://a:1", "http://b:2"])
    assert settings.queue_backend == "redis"
    assert Settings(batch_size=7).batch_size == 7


def test_bad_values_are_refused_with_the_field_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AZR_BATCH_SIZE", "0")
    with pytest.raises(ValidationError, match="batch_size"):
        Settings()
    monkeypatch.delenv("AZR_BATCH_SIZE")
    with pytest.raises(ValidationError, match="profile"):
        Settings(profile="cloud")
    with pytest.raises(ValidationError, match="no_such_field"):
        Settings(no_such_field=1)


def test_distributed_refuses_the_default_token() -> None:
    with pytest.raises(RuntimeError, match="AZR_API_TOKEN"):
        Settings(profile="distributed").require_production_secrets()
    with pytest.raises(RuntimeError):
        Settings(profile="distributed", api_token="").require_production_secrets()
    Settings(profile="distributed", api_token="s3cret-token").require_production_secrets()
    Settings(profile="embedded").require_production_secrets()  # a laptop run serves loopback only


def test_resolved_masks_secrets_and_is_saved(tmp_path: Path) -> None:
    settings = Settings(
        api_token="s3cret-token",
        database_url="postgresql+psycopg://azr:hunter2@db:5432/azr",
        run_root=tmp_path,
        run_id="r1",
    )
    path = settings.save_resolved()
    text = path.read_text()
    assert path == tmp_path / "r1" / "settings.json"
    assert "s3cret-token" not in text and "hunter2" not in text
    saved = json.loads(text)
    assert saved["database_url"] == "postgresql+psycopg://azr:***@db:5432/azr"
    assert saved["batch_size"] == 2 and set(saved) == set(Settings.model_fields)
    assert Settings().resolved()["api_token"] != DEFAULT_API_TOKEN


@pytest.mark.parametrize(
    ("url", "masked"),
    [
        ("redis://127.0.0.1:6379/0", "redis://127.0.0.1:6379/0"),
        ("redis://:pw@host:6379/0", "redis://:***@host:6379/0"),
        ("postgresql+psycopg://u@h/db", "postgresql+psycopg://u@h/db"),
        ("sqlite:///runs/azr.sqlite3", "sqlite:///runs/azr.sqlite3"),
    ],
)
def test_mask_url_password(url: str, masked: str) -> None:
    assert mask_url_password(url) == masked
