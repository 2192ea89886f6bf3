"""The TOML config file as one settings layer: flag > AZR_* environment > config file > profile default > field
default, each level checked; unknown keys and bad values name the file, the key and the source; the example files
in configs/ load and validate; `--config` on `azr config show`, `azr run`, `azr coordinator` and `azr trainer`."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from pydantic import ValidationError
from typer.testing import CliRunner

from azr.cli.main import app
from services.settings import PROFILE_DEFAULTS, Settings, load_settings, settings_fields
from services.settings.config_file import ConfigFileError

REPO_ROOT = Path(__file__).resolve().parents[3]
RUNNER = CliRunner()


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """No AZR_* variable of the caller's shell leaks into these tests."""
    for name in list(os.environ):
        if name.startswith("AZR_"):
            monkeypatch.delenv(name)


def write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def test_field_default_when_nothing_sets_it() -> None:
    assert "references_k" not in PROFILE_DEFAULTS["embedded"]
    assert load_settings().rollout.references_k == settings_fields()["references_k"].default == 6


def test_profile_default_beats_the_field_default() -> None:
    assert settings_fields()["batch_size"].default == 64
    assert load_settings().rollout.batch_size == PROFILE_DEFAULTS["embedded"]["batch_size"] == 2


def test_config_file_beats_the_profile_default(tmp_path: Path) -> None:
    config = write(tmp_path / "run.toml", "batch_size = 5\nreferences_k = 3\nsglang_urls = ['http://a:1']\n")
    settings = load_settings(config)
    assert (settings.rollout.batch_size, settings.rollout.references_k, settings.inference.sglang_urls) == (5, 3, ["http://a:1"])
    assert settings.rollout.max_response_tokens == PROFILE_DEFAULTS["embedded"]["max_response_tokens"]  # not in file


def test_environment_beats_the_config_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = write(tmp_path / "run.toml", "batch_size = 5\nreferences_k = 3\n")
    monkeypatch.setenv("AZR_BATCH_SIZE", "7")
    settings = load_settings(config)
    assert (settings.rollout.batch_size, settings.rollout.references_k) == (7, 3)


def test_flag_beats_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = write(tmp_path / "run.toml", "batch_size = 5\n")
    monkeypatch.setenv("AZR_BATCH_SIZE", "7")
    assert load_settings(config, batch_size=9).rollout.batch_size == 9
    assert load_settings(config, batch_size=None).rollout.batch_size == 7  # None: the flag was not given


def test_the_file_may_choose_the_profile_and_its_defaults_fill_the_rest(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    config = write(tmp_path / "dist.toml", 'profile = "distributed"\nbatch_size = 16\n')
    settings = load_settings(config)
    assert (settings.run.profile, settings.rollout.batch_size,
            settings.storage.queue_backend) == ("distributed", 16, "redis")
    monkeypatch.setenv("AZR_PROFILE", "embedded")  # the environment's profile wins, with its defaults
    settings = load_settings(config)
    assert (settings.run.profile, settings.rollout.batch_size,
            settings.storage.queue_backend) == ("embedded", 16, "inprocess")


def test_azr_config_names_the_file_for_every_settings_object(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = write(tmp_path / "env.toml", "batch_size = 11\n")
    monkeypatch.setenv("AZR_CONFIG", str(config))
    assert Settings().rollout.batch_size == 11  # e.g. `azr serve proposer`, which has no --config
    other = write(tmp_path / "flag.toml", "batch_size = 12\n")
    assert load_settings(other).rollout.batch_size == 12  # --config beats AZR_CONFIG
    assert Settings().rollout.batch_size == 11  # and only for the settings built with it


def test_an_unknown_key_names_the_key_and_the_file(tmp_path: Path) -> None:
    config = write(tmp_path / "typo.toml", "batch_size = 4\nbatch_sise = 5\n")
    with pytest.raises(ConfigFileError) as raised:
        load_settings(config)
    assert str(config) in str(raised.value) and "unknown setting 'batch_sise'" in str(raised.value)
    assert "did you mean 'batch_size'" in str(raised.value)


@pytest.mark.parametrize(("text", "reason"), [
    ("[trainer]\nlearning_rate = 1e-5\n", "'trainer' is a table; the file is flat"),
    ("batch_size = \n", "is not valid TOML"),
])
def test_tables_and_broken_toml_name_the_file(tmp_path: Path, text: str, reason: str) -> None:
    config = write(tmp_path / "bad.toml", text)
    with pytest.raises(ConfigFileError, match=reason) as raised:
        load_settings(config)
    assert str(config) in str(raised.value)


def test_a_missing_file_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigFileError, match="does not exist"):
        load_settings(tmp_path / "absent.toml")


def test_a_bad_value_in_the_file_is_a_validation_error(tmp_path: Path) -> None:
    with pytest.raises(ValidationError, match="batch_size"):
        load_settings(write(tmp_path / "zero.toml", "batch_size = 0\n"))


PRESET_DEPARTURES = {"learn-cpu": {"max_response_tokens"}, "selfplay-cpu": {"max_response_tokens", "local_engine"}}
"""Profile defaults a preset changes on purpose (each says why in its file)."""


@pytest.mark.parametrize(("name", "profile"), [("embedded", "embedded"), ("distributed", "distributed"),
                                              ("learn-cpu", "embedded"), ("selfplay-cpu", "embedded")])
def test_the_example_files_load_and_validate(name: str, profile: str) -> None:
    path = REPO_ROOT / "configs" / f"{name}.toml"
    settings = load_settings(path)
    assert settings.run.profile == profile
    assert settings.resolved()["api_token"] == "<placeholder: set AZR_API_TOKEN>"  # no secret in the file
    for key, value in PROFILE_DEFAULTS[profile].items():  # the file does not contradict its profile's sizes
        if key != "database_url" and key not in PRESET_DEPARTURES.get(name, set()):
            assert settings.value(key) == value, key


def test_the_learning_preset_trains_lora_adapters_at_the_measured_rate() -> None:
    settings = load_settings(REPO_ROOT / "configs" / "learn-cpu.toml")
    assert (settings.trainer.lora.lora_rank, settings.trainer.learning_rate,
            settings.run.run_id) == (16, 1e-4, "learn-cpu")
    assert (settings.rollout.max_response_tokens, settings.rollout.batch_size, settings.run.steps) == (384, 2, 500)
    # updates only on signal
    assert settings.trainer.entropy_coef == 0.0 and settings.trainer.skip_zero_advantage_batches
    # the int8 engine, per channel, with the outlier layers' down projections float32, and its mismatch corrected
    assert (settings.inference.local_engine_int8 and settings.inference.local_engine_int8_per_channel
            and settings.trainer.behaviour_is_cap == 2.0)
    kept = settings.inference.local_engine_int8_keep_float
    assert kept and len(set(kept)) == len(kept)
    assert all(name.startswith("layers.") and name.endswith(".mlp.down_proj") for name in kept)


def show(*args: str, env: dict[str, str] | None = None) -> dict:
    result = RUNNER.invoke(app, ["config", "show", *args], env=env)
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def test_config_show_prints_the_merged_result_at_every_level(tmp_path: Path) -> None:
    config = write(tmp_path / "run.toml", 'profile = "distributed"\nbatch_size = 5\nreferences_k = 3\n'
                                          'redis_url = "redis://u:secret@h:6379/0"\n')
    shown = show("--config", str(config))
    assert (shown["profile"], shown["batch_size"], shown["references_k"]) == ("distributed", 5, 3)
    assert shown["queue_backend"] == "redis" and shown["learnability_samples"] == 8  # profile and field defaults
    assert shown["redis_url"] == "redis://u:***@h:6379/0"  # secrets masked, as without a file
    shown = show("--config", str(config), env={"AZR_BATCH_SIZE": "7", "AZR_PROFILE": "embedded"})
    assert (shown["profile"], shown["batch_size"], shown["queue_backend"]) == ("embedded", 7, "inprocess")
    shown = show("--config", str(config), "--profile", "distributed", env={"AZR_PROFILE": "embedded"})
    assert (shown["profile"], shown["batch_size"], shown["queue_backend"]) == ("distributed", 5, "redis")
    shown = show(env={"AZR_CONFIG": str(config)})  # the file named by the environment
    assert shown["batch_size"] == 5


@pytest.mark.parametrize("command", [["config", "show"], ["run"], ["coordinator"], ["trainer"]])
def test_every_config_option_refuses_an_unknown_key_with_status_2(tmp_path: Path, command: list[str]) -> None:
    config = write(tmp_path / "typo.toml", "steps = 1\nlearning_rte = 1e-5\n")
    result = RUNNER.invoke(app, [*command, "--config", str(config)])
    assert result.exit_code == 2, result.output
    text = " ".join(result.output.split())
    assert "unknown setting 'learning_rte'" in text and str(config) in text


def test_a_bad_value_names_its_source(tmp_path: Path) -> None:
    config = write(tmp_path / "zero.toml", "batch_size = 0\n")
    from_file = RUNNER.invoke(app, ["config", "show", "--config", str(config)])
    assert from_file.exit_code == 2
    assert f"batch_size = 0 (from config file {config})" in from_file.output
    from_env = RUNNER.invoke(app, ["config", "show", "--config", str(config)], env={"AZR_BATCH_SIZE": "-3"})
    assert from_env.exit_code == 2 and "batch_size = '-3' (from environment variable AZR_BATCH_SIZE)" in from_env.output


def test_the_self_play_preset_is_what_its_run_page_says() -> None:
    settings = load_settings(REPO_ROOT / "configs" / "selfplay-cpu.toml")
    inference, rollout, trainer = settings.inference, settings.rollout, settings.trainer
    assert (inference.model, inference.local_engine, inference.llama_cpp_base) == ("qwen-coder-1.5b", "llama-cpp",
                                                                                  "release")
    assert (rollout.batch_size, rollout.learnability_samples, rollout.max_response_tokens) == (2, 4, 512)
    assert (rollout.solve_samples_per_task, rollout.solver_wrong_answer_reward,
            rollout.proposer_invalid_task_reward) == (2, -1.0, -0.5)  # the signal levers, on
    assert (trainer.lora.format_warmup_per_type, trainer.lora.format_warmup_epochs) == (6, 1)  # the warm-up switch
    assert (trainer.lora.lora_rank, trainer.learning_rate, trainer.entropy_coef) == (16, 1e-4, 0.0)
