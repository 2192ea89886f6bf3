"""`azr run --resume` takes a run's algorithm settings from its settings.json, the paper / released-code switches
and the update's precision included; a run saved before the clip range had two sides keeps its symmetric ε."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from azr.cli.run_cmd import _resume_overrides
from services.settings import load_settings


def saved_run(tmp_path: Path, values: dict[str, object]) -> Path:
    run_dir = tmp_path / "runs" / "r1"
    run_dir.mkdir(parents=True)
    (run_dir / "settings.json").write_text(json.dumps({"run_id": "r1", "batch_size": 2, **values}))
    return run_dir


def test_the_switches_are_resumed(tmp_path: Path) -> None:
    switches = {"clip_ratio_low": 0.2, "clip_ratio_high": 0.28, "clip_ratio_c": 3.0,
                "loss_agg_mode": "micro-batch-token-mean", "loss_agg_micro_batch_size": 8,
                "trr_statistics": "token-weighted", "unlearnable_proposal_reward": -0.5,
                "induction_gold_imports": True}
    overrides = _resume_overrides(saved_run(tmp_path, switches))
    assert {key: overrides[key] for key in switches} == switches


def test_a_run_saved_with_clip_eps_resumes_with_that_symmetric_clip(tmp_path: Path) -> None:
    overrides = _resume_overrides(saved_run(tmp_path, {"clip_eps": 0.15}))
    assert (overrides["clip_ratio_low"], overrides["clip_ratio_high"]) == (0.15, 0.15)
    assert "clip_eps" not in overrides  # no longer a setting: passing it on would be refused


def test_what_fixes_an_update_s_numbers_is_resumed_over_the_environment(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """The updates a resumed run remakes equal the lost ones bit for bit only with the same precision and split:
    an AZR_* variable set differently at the resume does not change them."""
    numerics = {"trainer_bf16_cpu": False, "trainer_bf16": False, "local_engine_dtype": "float32",
                "weight_decay": 0.05, "grad_clip": 0.5, "ppo_epochs": 2, "micro_batch_tokens": 1024,
                "logprob_chunk_tokens": 64, "gradient_checkpointing": False, "lora_dropout": 0.1,
                "lora_target_modules": ["q_proj"]}
    overrides = _resume_overrides(saved_run(tmp_path, numerics))
    assert {key: overrides[key] for key in numerics} == numerics
    monkeypatch.setenv("AZR_TRAINER_BF16_CPU", "true")
    monkeypatch.setenv("AZR_WEIGHT_DECAY", "0.0")
    settings = load_settings(None, **overrides)
    assert (settings.trainer.trainer_bf16_cpu, settings.trainer.weight_decay,
            settings.inference.local_engine_dtype) == (False, 0.05, "float32")
