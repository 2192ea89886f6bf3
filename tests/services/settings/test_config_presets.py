"""The two exact presets (docs/paper-vs-code.md): configs/paper.toml and configs/authors-code.toml load with exactly
the values their line comments cite, every line cites one, and `azr config show --describe` shows each value's
source; the distributed default says which side it follows."""

from __future__ import annotations

import json
import os
import tomllib
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from azr.cli.main import app
from services.settings import load_settings, settings_fields
from services.settings.config_file import config_file_comments

CONFIGS = Path(__file__).resolve().parents[3] / "configs"
SEEDS = ["services/data/seeds/7b_coder_seed_io.jsonl", "services/data/seeds/7b_coder_code_f_seed_io.jsonl"]
SWITCHES = ("clip_ratio_low", "clip_ratio_high", "clip_ratio_c", "loss_agg_mode", "loss_agg_micro_batch_size",
            "trr_statistics", "unlearnable_proposal_reward", "induction_gold_imports")
LEVERS = ("solve_samples_per_task", "solver_wrong_answer_reward", "proposer_invalid_task_reward",
          "format_warmup_per_type", "prompt_gradient")
"""The self-play issue's signal levers, its warm-up switch and the frozen-prompt gradient: departures
configs/selfplay-cpu.toml sets."""

# key -> (value, what its comment must cite), written from the paper and the released code, not from the files.
PAPER: dict[str, tuple[Any, str]] = {
    "profile": ("distributed", "Table 3's sizes"),
    "steps": (500, "Table 3: Total Steps 500"),
    "batch_size": (64, "Table 3: Train Batch Size 64 * 6"),
    "references_k": (6, "Table 3: K References 6"),
    "learnability_samples": (8, "Table 3: N Samples to Estimate Task Accuracy 8"),
    "seed_multiplier": (4, "Table 3: Seed Batch Factor 4"),
    "buffer_cap": (16384, "Table 3: Max Programs 16384"),
    "max_prompt_tokens": (6144, "Table 3: Max Prompt Length 6144"),
    "max_response_tokens": (8096, "Table 3: Max Response Length 8096"),
    "learning_rate": (1e-6, "Table 3: Learning Rate 1e-6"),
    "grad_clip": (1.0, "Table 3: Grad Clip 1.0"),
    "entropy_coef": (0.001, "Table 3: Entropy Coefficient 0.001"),
    "ppo_epochs": (1, "Table 3: PPO Epochs 1"),
    "temperature": (1.0, "Table 3: Rollout Temperature 1.0"),
    "top_p": (1.0, "Table 3: Rollout Top-P 1.0"),
    "skip_zero_advantage_batches": (False, "Algorithm 1: every step makes its update"),
    "induction_inputs": (10, "10 inputs"),
    "determinism_runs": (2, "§3.3.3: \"we fixed j = 2"),
    "executor_timeout_s": (10.0, "within 10 seconds"),
    "seed_files": ([], "§3.3.1: the base model seeds the buffers"),
    "max_staleness": (0, "Algorithm 1: propose, solve and update in one synchronous step"),
    "weight_decay": (0.01, "paper silent"),
    "reject_multiple_functions": (False, "Figs 34-35 allow custom classes"),
    "unlearnable_proposal_reward": (0.0, "Eq 4: r_propose = 0 if r̄_solve is 0 or 1"),
    "solve_samples_per_task": (1, "each answered once"),
    "solver_wrong_answer_reward": (-0.5, "Eq 6: −0.5"),
    "proposer_invalid_task_reward": (-1.0, "§3.1 after Eq 6"),
    "format_warmup_per_type": (0, "self-play from the base model"),
    "prompt_gradient": (True, "Eq 9's gradient through the whole sequence"),
    "trr_statistics": ("per-sample", "Eq 8"),
    "clip_ratio_low": (0.2, "Eq 9: clip(s, 1 − ε, 1 + ε)"),
    "clip_ratio_high": (0.2, "Eq 9: the same ε above"),
    "clip_ratio_c": (0.0, "Eq 9 has no dual clip"),
    "loss_agg_mode": ("seq-mean-token-mean", "Eq 9: E_q[1/|o| Σ_t"),
    "induction_gold_imports": (False, "paper silent"),
}

AUTHORS_CODE: dict[str, tuple[Any, str]] = {
    "profile": ("distributed", "the script's sizes"),
    "steps": (960, "total_epochs 30 x 32 batches"),
    "batch_size": (64, "data.train_batch_size 64"),
    "references_k": (6, "io_n 6"),
    "learnability_samples": (8, "n_samples 8"),
    "seed_multiplier": (4, "seed_batch_factor 4"),
    "buffer_cap": (16384, "max_programs 16384"),
    "induction_inputs": (10, "num_inputs 10"),
    "max_prompt_tokens": (6144, "max_prompt_length 6144"),
    "max_response_tokens": (8096, "max_response_length 8096"),
    "learning_rate": (1e-6, "lr 1e-6"),
    "grad_clip": (1.0, "grad_clip 1.0"),
    "weight_decay": (0.0, "weight_decay 0.0"),
    "entropy_coef": (0.0, "entropy_coeff 0.0"),
    "ppo_epochs": (1, "ppo_epochs 1"),
    "temperature": (1.0, "temperature 1.0"),
    "top_p": (1.0, "top_p 1.0"),
    "executor_timeout_s": (10.0, "execute_max_timeout 10"),
    "determinism_runs": (2, "the program runs twice"),
    "reject_multiple_functions": (True, "reject_multiple_functions True"),
    "seed_files": (SEEDS, "data/7b_coder_seed_io.jsonl and data/7b_coder_code_f_seed_io.jsonl"),
    "max_staleness": (0, "in one step"),
    "skip_zero_advantage_batches": (False, "one actor update every step"),
    "unlearnable_proposal_reward": (-0.5, "r == 0 becomes −0.5 (issue #37)"),
    "solve_samples_per_task": (1, "answers each task once"),
    "solver_wrong_answer_reward": (-0.5, "well-formed wrong answer earns −0.5"),
    "proposer_invalid_task_reward": (-1.0, "invalid proposal earns −1"),
    "format_warmup_per_type": (0, "no supervised pass"),
    "prompt_gradient": (True, "gradients through prompt and response"),
    "trr_statistics": ("token-weighted", "masked_whiten, Bessel, rsqrt(var + 1e-8)"),
    "clip_ratio_low": (0.2, "clip_ratio_low 0.2"),
    "clip_ratio_high": (0.28, "clip_ratio_high 0.28"),
    "clip_ratio_c": (3.0, "clip_ratio_c 3.0"),
    "loss_agg_mode": ("micro-batch-token-mean", "token-mean per micro-batch / gradient_accumulation"),
    "loss_agg_micro_batch_size": (16, "ppo_micro_batch_size_per_gpu 16"),
    "induction_gold_imports": (True, "imports=gold imports"),
}

RUNNER = CliRunner()


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """No AZR_* variable of the caller's shell leaks into these tests."""
    for name in list(os.environ):
        if name.startswith("AZR_"):
            monkeypatch.delenv(name)


@pytest.mark.parametrize(("name", "expected"), [("paper", PAPER), ("authors-code", AUTHORS_CODE)])
def test_each_preset_loads_with_exactly_the_values_its_comments_cite(name: str,
                                                                     expected: dict[str, tuple[Any, str]]) -> None:
    path = CONFIGS / f"{name}.toml"
    with path.open("rb") as stream:
        assert set(tomllib.load(stream)) == set(expected)  # no key more, none less
    comments = config_file_comments(path)
    assert set(comments) == set(expected), "every line cites its source"
    settings = load_settings(path)
    for key, (value, citation) in expected.items():
        loaded = settings.value(key)
        assert (loaded if key != "seed_files" else [str(p) for p in loaded]) == value, key
        assert citation in comments[key], (key, comments[key])
    for switch in SWITCHES:  # the presets set every switch, whatever the defaults become
        assert switch in expected or switch == "loss_agg_micro_batch_size"
    assert all(lever in expected for lever in LEVERS), "the self-play issue's levers are off, by name, in both"


def test_the_presets_seed_files_exist() -> None:
    root = CONFIGS.parent
    assert all((root / seed).is_file() for seed in SEEDS)


def test_the_presets_differ_exactly_where_the_paper_and_the_code_do() -> None:
    differing = {key for key in PAPER if key in AUTHORS_CODE and PAPER[key][0] != AUTHORS_CODE[key][0]}
    assert differing == {"steps", "weight_decay", "entropy_coef", "reject_multiple_functions", "seed_files",
                         "unlearnable_proposal_reward", "trr_statistics", "clip_ratio_high", "clip_ratio_c",
                         "loss_agg_mode", "induction_gold_imports"}
    documented = (CONFIGS.parent / "docs" / "paper-vs-code.md").read_text()
    assert all(f"`{key}`" in documented for key in differing | {"max_staleness", "skip_zero_advantage_batches"})


def test_every_switch_names_the_paper_and_the_released_code() -> None:
    for switch in SWITCHES:
        description = settings_fields()[switch].description or ""
        assert "paper" in description and "released code" in description, switch


def show(*args: str, env: dict[str, str] | None = None) -> dict[str, Any]:
    result = RUNNER.invoke(app, ["config", "show", *args], env=env)
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def test_config_show_describe_names_each_values_source() -> None:
    preset = str(CONFIGS / "paper.toml")
    shown = show("--config", preset, "--describe")
    assert shown["steps"]["value"] == 500
    assert shown["steps"]["source"] == f"config file {preset}: Table 3: Total Steps 500"
    assert shown["loss_agg_mode"]["source"].startswith(f"config file {preset}: Eq 9")
    assert "released code" in shown["clip_ratio_high"]["description"]
    assert shown["database_url"]["source"] == "distributed profile default"
    assert shown["lora_rank"]["source"] == "field default"
    shown = show("--config", preset, "--describe", "--profile", "embedded", env={"AZR_STEPS": "7"})
    assert (shown["steps"]["value"], shown["steps"]["source"]) == (7, "environment variable AZR_STEPS")
    assert shown["profile"]["source"] == "command line"
    assert shown["database_url"]["source"] == "embedded profile default"
    plain = show("--config", preset)
    assert plain["steps"] == 500  # without --describe: the values alone, as before


def test_the_distributed_default_says_which_side_it_follows() -> None:
    text = (CONFIGS / "distributed.toml").read_text()
    assert "Which it follows" in text and "docs/paper-vs-code.md" in text
    comments = config_file_comments(CONFIGS / "distributed.toml")
    assert "neither" in comments["steps"] and "neither" in comments["max_staleness"]
    settings = load_settings(CONFIGS / "distributed.toml")
    assert (settings.run.steps, settings.rollout.max_staleness,
            settings.trainer.loss_agg_mode) == (1000, 1, "token-mean")


def test_line_comments_are_read_after_the_value_only(tmp_path: Path) -> None:
    path = tmp_path / "cited.toml"
    path.write_text('# a header, not a key\nrun_id = "a#b"   # the run # with a hash\nsteps = 3\n'
                    'wandb_project = "p" #\nsglang_urls = [\n  "http://a:1",  # inside an array: not a key line\n]\n')
    assert config_file_comments(path) == {"run_id": "the run # with a hash"}
