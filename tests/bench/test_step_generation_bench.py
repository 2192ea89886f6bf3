"""bench/step_generation.py's B sweep (`--int8-batch-sizes`): the step times bench/signal_odds.py ranks batch sizes
with, on the engine form the learning preset runs (per-channel scales, named layers float32)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO_ROOT))  # bench/ is a directory of scripts, not an installed package

from bench import step_generation  # noqa: E402


@pytest.mark.slow
def test_the_b_sweep_times_each_b_on_the_presets_engine_form(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "b.json"
    monkeypatch.setattr(sys, "argv", ["step_generation.py", "--model", "tiny", "--max-new-tokens", "4",
                                      "--int8-batch-sizes", "1", "2", "--per-channel",
                                      "--keep-float", "layers.0.mlp.down_proj", "--out", str(out)])
    step_generation.main()
    result = json.loads(out.read_text())
    assert result["engine"] == "float32 + int8 Linear (per channel; float32: layers.0.mlp.down_proj)"
    assert set(result["batch_sizes"]) == {"1", "2"}
    assert result["batch_sizes"]["1"]["ratio"] == 1.0
    for row in result["batch_sizes"].values():
        assert row["median_seconds"] > 0 and len(row["seconds"]) == 1
    # 6 B rows at most 4 tokens each: B = 2 decodes twice the rows of B = 1
    assert 0 < result["batch_sizes"]["1"]["tokens"][0] <= 6 * 4
    assert 0 < result["batch_sizes"]["2"]["tokens"][0] <= 12 * 4
    assert "per channel" in capsys.readouterr().out


@pytest.mark.slow
def test_the_step_comparison_times_the_presets_int8_engine_against_the_engine_it_replaced(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "step.json"
    monkeypatch.setattr(sys, "argv", ["step_generation.py", "--model", "tiny", "--max-new-tokens", "3",
                                      "--ignore-eos", "--int8", "--per-channel",
                                      "--keep-float", "layers.0.mlp.down_proj", "--out", str(out)])
    step_generation.main()
    result = json.loads(out.read_text())
    assert result["int8_engine"] == "float32 + int8 Linear (per channel; float32: layers.0.mlp.down_proj)"
    (run,) = result["runs"]
    # EOS ignored: every one of the 12 rows decodes to the cap in each way of generating the step
    assert run["baseline"]["tokens"] == run["now"]["tokens"] == run["now_int8"]["tokens"] == 12 * 3
    # the shared-prefix prefill computes fewer prompt positions than the left-padded batches
    assert 0 < result["prompt_positions"]["now"] < result["prompt_positions"]["baseline"]
    assert run["speedup_int8"] == round(run["baseline"]["seconds"] / run["now_int8"]["seconds"], 2)
