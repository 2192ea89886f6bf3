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
