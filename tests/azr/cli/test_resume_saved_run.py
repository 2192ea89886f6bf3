"""A run directory saved before issue 38 split the settings into sections (tests/data/runs/pre-issue-38: its
settings.json in the flat layout every earlier version wrote) resumes: the run's saved sizes and algorithm come
back, its latest checkpoint is restored, the step counter and the policy version go on, and the settings it saves
again keep the flat layout."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

FIXTURE = Path(__file__).resolve().parents[2] / "data" / "runs" / "pre-issue-38"
PRE_ISSUE_38_RESUMED = set(json.loads((FIXTURE / "resumed-fields.json").read_text()))
"""The 48 settings `azr run --resume` took from settings.json when the fixture was made."""


def metrics(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


@pytest.mark.slow
def test_a_run_saved_before_the_sections_resumes(tmp_path: Path) -> None:
    run_dir = tmp_path / "runs" / "pre-issue-38"
    shutil.copytree(FIXTURE, run_dir)
    env = {**os.environ, "AZR_RUN_API_PORT": "0", "AZR_TENSORBOARD": "false",
           # set differently from the saved run: the saved values win for what a resumed run keeps
           "AZR_BATCH_SIZE": "3", "AZR_LEARNING_RATE": "0.5", "AZR_LORA_RANK": "4"}
    env.pop("AZR_DATABASE_URL", None)
    done = subprocess.run([sys.executable, "-m", "azr", "run", "--resume", str(run_dir), "--steps", "1",
                           "--max-response-tokens", "16"], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=900)
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-4000:]
    assert "resumed from" in output and "policy version 2, trainer step 2" in output, output[-4000:]
    lines = metrics(run_dir)
    assert [line["step"] for line in lines] == [1, 2, 3]
    assert (lines[-1]["policy_version"], lines[-1]["policy_version_after"]) == (2, 3)
    for task_type in ("deduction", "abduction", "induction"):
        assert lines[-1][f"buffer/{task_type}"] >= lines[-2][f"buffer/{task_type}"]
        assert lines[-1][f"count/{task_type}/propose"] == 2  # B = 2 from settings.json, not AZR_BATCH_SIZE's 3
    assert (run_dir / "checkpoints" / "v000003" / "trainer_state.pt").is_file()
    before = json.loads((FIXTURE / "settings.json").read_text())
    after = json.loads((run_dir / "settings.json").read_text())
    assert set(before) <= set(after) and not any(isinstance(value, dict) for value in after.values())
    kept = PRE_ISSUE_38_RESUMED - {"run_root", "max_response_tokens"}
    assert {key: after[key] for key in kept} == {key: before[key] for key in kept}
    assert (after["run_root"], after["max_response_tokens"]) == (str(tmp_path / "runs"), 16)
