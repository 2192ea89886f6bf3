"""`azr run` end to end on the tiny model: seeding from the first rows of the authors' seed files, self-play steps
with updates, checkpoints whose weights change, the metrics file growing (and its TensorBoard copy), Ctrl-C at a step
boundary, and `--resume`."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families
from safetensors.torch import load_file
from tensorboard_events import read_scalars
from throwaway_servers import free_port

from services.inference.tiny_model import tiny_model_dir
from services.reporting.metric_sinks import numeric_scalars

REPO_ROOT = Path(__file__).resolve().parents[3]
SIZES = ["--model", "tiny", "--batch-size", "2", "--max-response-tokens", "16"]


def azr_run(cwd: Path, *args: str, extra_env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    # The tiny model's rewards are all -1: with the embedded default (no step without signal) nothing would train,
    # so this run takes Table 3's rule (every batch steps, entropy bonus 0.001) to exercise the update path.
    env = {**os.environ, "AZR_SEED_MAX_ROUNDS": "1", "AZR_EXECUTOR_WORKERS": "1", "AZR_LEARNABILITY_SAMPLES": "2",
           "AZR_RUN_API_PORT": "0", "AZR_SKIP_ZERO_ADVANTAGE_BATCHES": "false", "AZR_ENTROPY_COEF": "0.001",
           **(extra_env or {})}
    env.pop("AZR_DATABASE_URL", None)
    return subprocess.Popen([sys.executable, "-m", "azr", "run", *SIZES, *args], cwd=cwd, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def metrics(run_dir: Path) -> list[dict]:
    path = run_dir / "metrics.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def weights(directory: Path) -> dict:
    return load_file(str(directory / "model.safetensors"))


def assert_in_tensorboard(run_dir: Path, lines: list[dict]) -> None:
    """Every numeric value of every metrics line is a TensorBoard scalar of the same name at the line's step."""
    scalars = read_scalars(run_dir / "tensorboard")
    for line in lines:
        for key, value in numeric_scalars(line).items():
            assert scalars[key][line["step"]] == pytest.approx(value, rel=1e-5, abs=1e-6), (key, line["step"])


@pytest.mark.slow
def test_run_trains_stops_on_ctrl_c_and_resumes(tmp_path: Path, author_seed_sample_args: list[str]) -> None:
    run_dir = tmp_path / "runs" / "e2e"
    first = azr_run(tmp_path, "--run-id", "e2e", "--steps", "2", *author_seed_sample_args,
                    extra_env={"AZR_EVAL_EVERY_STEPS": "1", "AZR_EVAL_LIMIT": "2"})  # CRUXEval after each step
    output, _ = first.communicate(timeout=900)
    assert first.returncode == 0, output
    lines = metrics(run_dir)
    assert [line["step"] for line in lines] == [1, 2]
    # Nothing long is silent: every generation batch and every update's micro-batches report as they go.
    assert "generation: step " in output and "update: micro-batch 1/" in output, output[-3000:]
    # ...and no library progress bar on the weight loads and saves every update makes
    assert "Loading weights" not in output and "Writing model shards" not in output, output[-3000:]
    assert [line["policy_version_after"] for line in lines] == [1, 2]
    # The seed files filled all three buffers, so every one of the six groups has B = 2 episodes.
    for task_type in ("deduction", "abduction", "induction"):
        for role in ("propose", "solve"):
            assert lines[0][f"count/{task_type}/{role}"] == 2, (task_type, role, lines[0])
        assert lines[0][f"buffer/{task_type}"] > 2
    for line in lines:  # the periodic evaluation ran on the updated weights and joined the metrics line
        for key in ("eval/cruxeval_o", "eval/cruxeval_i"):
            assert line[f"{key}/count"] == 2 and line[key] in (0.0, 0.5, 1.0), line
        assert line["eval/policy_version"] == line["policy_version_after"] and line["time/eval"] > 0
    assert_in_tensorboard(run_dir, lines)
    checkpoints = sorted((run_dir / "checkpoints").iterdir())
    assert [c.name for c in checkpoints] == ["v000001", "v000002"]
    base, after = weights(tiny_model_dir()), weights(checkpoints[-1])
    assert any(not (base[name] == after[name]).all() for name in base), "the updates did not change the weights"

    # Ctrl-C during a 5-step resume: the run ends cleanly at a step boundary, everything saved.
    # Its own HTTP API (dashboard, buffers, /metrics) is up while it runs.
    port = free_port()
    resumed = azr_run(tmp_path, "--resume", str(run_dir), "--steps", "5", extra_env={"AZR_RUN_API_PORT": str(port)})
    deadline = time.monotonic() + 600
    while len(metrics(run_dir)) < 3 and time.monotonic() < deadline and resumed.poll() is None:
        time.sleep(0.5)
    api = f"http://127.0.0.1:{port}"
    recorded = httpx.get(f"{api}/v1/runs/e2e/steps", timeout=30).json()
    assert [step["step"] for step in recorded["steps"]][:3] == [1, 2, 3]
    scraped = {family.name: family for family in text_string_to_metric_families(httpx.get(f"{api}/metrics",
                                                                                          timeout=30).text)}
    assert scraped["azr_coordinator_steps"].samples[0].value >= 1  # step 3 was this session's
    # The executor's series exist from the start (a tiny model rarely writes anything the executor must run).
    assert {s.labels["kind"] for s in scraped["azr_executor_task_duration_seconds"].samples} >= {
        "validate_proposal", "check_deduction"}
    assert httpx.get(f"{api}/dashboard", timeout=30).status_code == 200
    assert httpx.get(f"{api}/v1/buffers/deduction", params={"limit": 1}, timeout=30).json()["total"] > 2
    resumed.send_signal(signal.SIGINT)
    output, _ = resumed.communicate(timeout=600)
    assert resumed.returncode == 0, output
    assert "stopping after this step" in output
    steps = [line["step"] for line in metrics(run_dir)]
    assert steps[:3] == [1, 2, 3] and len(steps) < 7, steps
    assert sorted(c.name for c in (run_dir / "checkpoints").iterdir())[-1] == f"v{len(steps):06d}"

    # Resume again: the step counter, policy version and buffers continue (no re-seeding).
    again = azr_run(tmp_path, "--resume", str(run_dir), "--steps", "1")
    output, _ = again.communicate(timeout=600)
    assert again.returncode == 0, output
    assert "resumed from" in output and "seeding buffers" not in output
    final = metrics(run_dir)
    assert final[-1]["step"] == len(steps) + 1
    assert "eval/cruxeval_o" not in final[-1]  # eval_every_steps is 0 (off) unless set
    assert final[-1]["policy_version"] == len(steps)
    assert final[-1]["policy_version_after"] == len(steps) + 1
    assert_in_tensorboard(run_dir, final)  # each session added its file; the steps continue across them

    # The record's samples page reads the same store: verbatim responses of the first and last steps, the tasks.
    from typer.testing import CliRunner

    from azr.cli.main import app

    page = CliRunner().invoke(app, ["samples", str(run_dir), "--window", "1", "--per-role", "2",
                                    "--out", str(tmp_path / "samples.md")])
    assert page.exit_code == 0, page.output
    text = (tmp_path / "samples.md").read_text()
    for role in ("propose", "solve"):
        assert f"## {role} responses from the first 1 steps (2 shown)" in text
        assert f"## {role} responses from the last 1 steps (2 shown)" in text
    assert "## Self-proposed tasks in the buffers:" in text and "~~~~" in text
