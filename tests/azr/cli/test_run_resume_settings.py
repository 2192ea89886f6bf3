"""`azr run --resume` takes a run's algorithm settings from its settings.json, the paper / released-code switches
included; a run saved before the clip range had two sides keeps its symmetric ε."""

from __future__ import annotations

import json
from pathlib import Path

from azr.cli.run_cmd import _resume_overrides


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
