"""The one settings object: profiles, environment overrides, docstrings, secrets."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import ValidationError

from services.settings import DEFAULT_API_TOKEN, PROFILE_DEFAULTS, Settings, mask_url_password, settings_fields


def test_every_field_has_a_docstring() -> None:
    missing = [name for name, field in settings_fields().items() if not (field.description or "").strip()]
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
    assert {key: settings.value(key) for key in paper_table_3} == paper_table_3
    backends = (settings.storage.queue_backend, settings.executor.executor_backend,
                settings.inference.inference_backend)
    assert backends == ("redis", "docker", "sglang")
    assert settings.storage.database_url.startswith("postgresql+psycopg://")


def test_embedded_shrinks_sizes_only(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AZR_DATABASE_URL", raising=False)  # the suite's own database (tests/conftest.py) is no default
    embedded, distributed = Settings(profile="embedded"), Settings(profile="distributed")
    assert embedded.rollout.batch_size == 2 and embedded.storage.database_url.startswith("sqlite:///")
    backends = (embedded.storage.queue_backend, embedded.executor.executor_backend,
                embedded.inference.inference_backend)
    assert backends == ("inprocess", "process", "local")
    algorithm = ["references_k", "learnability_samples", "seed_multiplier", "temperature", "clip_ratio_low",
                 "clip_ratio_high", "clip_ratio_c", "loss_agg_mode", "trr_statistics", "unlearnable_proposal_reward",
                 "induction_gold_imports", "determinism_runs"]
    assert [embedded.value(k) for k in algorithm] == [distributed.value(k) for k in algorithm]
    changed = {k for k in settings_fields() if embedded.value(k) != distributed.value(k)}
    assert changed <= set(PROFILE_DEFAULTS["embedded"]) | {"profile"}


def test_environment_and_keywords_override_profile_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AZR_PROFILE", "distributed")
    monkeypatch.setenv("AZR_BATCH_SIZE", "3")
    monkeypatch.setenv("AZR_SGLANG_URLS", '["http://a:1", "http://b:2"]')
    settings = Settings()
    assert (settings.run.profile, settings.rollout.batch_size,
            settings.inference.sglang_urls) == ("distributed", 3, ["http://a:1", "http://b:2"])
    assert settings.storage.queue_backend == "redis"
    assert Settings(batch_size=7).rollout.batch_size == 7


def test_bad_values_are_refused_with_the_field_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AZR_BATCH_SIZE", "0")
    with pytest.raises(ValidationError, match="batch_size"):
        Settings()
    monkeypatch.delenv("AZR_BATCH_SIZE")
    with pytest.raises(ValidationError, match="profile"):
        Settings(profile="cloud")
    with pytest.raises(ValidationError, match="no_such_field"):
        Settings(no_such_field=1)


@pytest.mark.parametrize("profile", ["distributed", "embedded"])
def test_every_profile_refuses_the_default_token(profile: str) -> None:
    """Issue 37: the embedded `azr serve proposer` took `change-me` (loopback is reachable by every local user and
    every unconfined program)."""
    with pytest.raises(RuntimeError, match="AZR_API_TOKEN"):
        Settings(profile=profile).api.require_production_secrets()
    with pytest.raises(RuntimeError):
        Settings(profile=profile, api_token="").api.require_production_secrets()
    Settings(profile=profile, api_token="s3cret-token").api.require_production_secrets()


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
    assert saved["batch_size"] == 2 and set(saved) == set(settings_fields())
    assert Settings().resolved()["api_token"] != DEFAULT_API_TOKEN


@pytest.mark.parametrize(
    ("url", "masked"),
    [
        ("redis://127.0.0.1:6379/0", "redis://127.0.0.1:6379/0"),
        ("redis://:pw@host:6379/0", "redis://:***@host:6379/0"),
        ("postgresql+psycopg://u@h/db", "postgresql+psycopg://u@h/db"),
        ("sqlite:///runs/azr.sqlite3", "sqlite:///runs/azr.sqlite3"),
        ("postgresql://u:p@ss/w:rd@h:5432/db", "postgresql://u:***@h:5432/db"),
        ("postgresql://h/db?user=u&password=hunter2&sslmode=require",
         "postgresql://h/db?user=u&password=***&sslmode=require"),
        ("http://admin:s3cret@sglang:30000", "http://admin:***@sglang:30000"),
        ("http://sglang:30000/?api_key=abc#x", "http://sglang:30000/?api_key=***#x"),
        ("redis://:pw@host/0?Password=x", "redis://:***@host/0?Password=***"),
    ],
)
def test_mask_url_password(url: str, masked: str) -> None:
    assert mask_url_password(url) == masked


def test_every_url_field_is_masked_in_what_is_saved() -> None:
    """Issue 37: credentials in sglang_urls (and `?password=`) reached settings.json, the runs table and W&B."""
    settings = Settings(sglang_urls=["http://k:hunter2@a:30000", "http://b:30000?token=hunter3"],
                        database_url="postgresql://h/db?password=hunter4", proposer_url="http://x:hunter5@p:8001")
    text = json.dumps(settings.resolved())
    assert not any(secret in text for secret in ("hunter2", "hunter3", "hunter4", "hunter5")), text
    assert settings.resolved(mask_secrets=False)["sglang_urls"][0] == "http://k:hunter2@a:30000"
