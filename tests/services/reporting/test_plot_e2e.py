"""`azr run` (tiny model, authors' seed files, 3 steps) then `azr plot` on its run directory, both through the real
command line, then the PNGs opened and checked: real size, not blank, coloured lines drawn."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from services.reporting.plots import ROLE_COLOURS, TYPE_COLOURS
from tests.services.reporting.png_checks import assert_real_figure, pixels_of_colour

LINE_PIXELS = 100


def run_azr(cwd: Path, *args: str, timeout: int) -> subprocess.CompletedProcess[str]:
    # Same small settings as tests/services/coordinator/test_embedded_run.py: seconds per step on the tiny model.
    env = {**os.environ, "AZR_SEED_MAX_ROUNDS": "1", "AZR_EXECUTOR_WORKERS": "1", "AZR_LEARNABILITY_SAMPLES": "2"}
    env.pop("AZR_DATABASE_URL", None)
    return subprocess.run([sys.executable, "-m", "azr", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=timeout)


@pytest.mark.slow
def test_plot_a_real_tiny_run(tmp_path: Path, author_seed_sample_args: list[str]) -> None:
    trained = run_azr(tmp_path, "run", "--model", "tiny", "--steps", "3", "--batch-size", "2",
                      "--max-response-tokens", "16", "--run-id", "plotted", *author_seed_sample_args, timeout=900)
    assert trained.returncode == 0, trained.stdout + trained.stderr
    run_dir = tmp_path / "runs" / "plotted"
    lines = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert [line["step"] for line in lines] == [1, 2, 3]

    plotted = run_azr(tmp_path, "plot", str(run_dir), timeout=300)
    assert plotted.returncode == 0, plotted.stdout + plotted.stderr
    assert plotted.stderr.count("warning:") == 0, plotted.stderr
    printed = plotted.stdout.splitlines()
    plots = run_dir / "plots"
    for name in ("rewards.png", "format_ok.png", "response_length.png", "proposals.png"):
        assert str(plots / name) in printed
    # This run has no evaluation; the tiny model rarely proposes a valid task, so task metrics may be absent too:
    # each figure is there exactly when the file has its data, and otherwise stdout says why.
    assert "cruxeval.png not written: no CRUXEval evaluation in this run" in printed
    assert not (plots / "cruxeval.png").exists()
    measured = any(isinstance(value, float) for line in lines for key, value in line.items()
                   if key.startswith("task/") and not key.endswith("n_tasks"))
    assert (plots / "task_complexity.png").exists() == measured
    assert (str(plots / "task_complexity.png") in printed) == measured

    for name in ("rewards.png", "response_length.png"):
        image = assert_real_figure(plots / name)
        # Both roles have 2 episodes per step; where their values coincide the dashed solve line still leaves the
        # solid propose line visible, so both colours are on the canvas.
        for role, colour in ROLE_COLOURS.items():
            assert pixels_of_colour(image, colour) > LINE_PIXELS, (name, role)
    proposals = assert_real_figure(plots / "proposals.png")
    for task_type, colour in TYPE_COLOURS.items():
        assert pixels_of_colour(proposals, colour) > LINE_PIXELS, task_type
    if measured:
        assert_real_figure(plots / "task_complexity.png")
