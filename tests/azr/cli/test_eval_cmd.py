"""`azr eval cruxeval`: bad arguments and files exit 2 with the reason; the tiny model end to end as a subprocess,
twice, giving the same answers (greedy decoding is deterministic)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest
from typer.testing import CliRunner

from azr.cli.eval_cmd import default_out_path, model_label
from azr.cli.main import app

REPO_ROOT = Path(__file__).resolve().parents[3]
RUNNER = CliRunner()
SCORE_LINE = re.compile(r"^(CRUXEval-[OI])  accuracy (\d\.\d{3}) \((\d+)/(\d+)\)  format OK (\d\.\d{3})  "
                        r"parse failures (\d+)$", re.M)


def invoke(*args: str) -> object:
    return RUNNER.invoke(app, ["eval", "cruxeval", *args], env={"AZR_EXECUTOR_WORKERS": "1", "COLUMNS": "250"})


@pytest.mark.parametrize(("args", "reason"), [
    (["--split", "sideways"], "'sideways' is not one of 'output',"),
    (["--limit", "-1"], "must be 0 (all rows) or positive"),
    (["--batch-size", "0"], "must be at least 1"),
    (["--max-response-tokens", "0"], "must be at least 1"),
])
def test_bad_arguments_exit_2(args: list[str], reason: str) -> None:
    result = invoke("--model", "tiny", *args)
    assert result.exit_code == 2, result.output
    assert reason in " ".join(result.output.split())


def test_a_malformed_data_file_exits_2_naming_the_line(tmp_path: Path) -> None:
    data = tmp_path / "crux.jsonl"
    data.write_text('{"code": "def f(x):\\n    return x", "input": "1", "output": "1", "id": "a"}\n'
                    '{"code": "def f(x):\\n    return x", "input": "1", "id": "b"}\n')
    out = tmp_path / "out.jsonl"
    result = invoke("--model", "tiny", "--data", str(data), "--out", str(out))
    assert result.exit_code == 2
    assert f"{data}: line 2: not a CRUXEval row" in result.output and "`output`" in result.output
    assert not out.exists()
    missing = invoke("--model", "tiny", "--data", str(tmp_path / "absent.jsonl"))
    assert missing.exit_code == 2 and "no such file" in missing.output


def test_an_unknown_model_or_unwritable_output_exits_2_leaving_no_file(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    result = invoke("--model", str(tmp_path / "no-model-here"), "--limit", "1", "--out", str(out))
    assert result.exit_code == 2 and "unknown model" in result.output
    assert not out.exists()
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    unwritable = invoke("--model", "tiny", "--limit", "1", "--out", str(blocker / "out.jsonl"))
    assert unwritable.exit_code == 2 and "cannot write" in unwritable.output


def test_default_output_path_names_the_model_and_time() -> None:
    now = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    assert default_out_path(Path("runs"), "tiny", now) == Path("runs/eval/cruxeval-tiny-20260102T030405Z.jsonl")
    assert model_label("/models/run 1/checkpoints/v000003") == "v000003"
    assert model_label("qwen-coder-0.5b") == "qwen-coder-0.5b"


def run_eval(cwd: Path, *args: str) -> tuple[subprocess.CompletedProcess[str], float]:
    env = {**os.environ, "AZR_EXECUTOR_WORKERS": "1", "PYTHONPATH": str(REPO_ROOT)}
    for name in ("AZR_RUN_ROOT", "AZR_MODEL", "AZR_EVAL_DATA", "AZR_MAX_RESPONSE_TOKENS"):
        env.pop(name, None)
    began = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "azr", "eval", "cruxeval", "--model", "tiny", "--limit", "20",
                           "--max-response-tokens", "64", *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=900)
    return done, time.perf_counter() - began


def read_samples(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.mark.slow
def test_tiny_model_end_to_end_twice_gives_the_same_answers(tmp_path: Path) -> None:
    out = tmp_path / "first.jsonl"
    first, seconds = run_eval(tmp_path, "--out", str(out))
    assert first.returncode == 0, first.stderr[-3000:]
    samples = read_samples(out)
    for label, split in (("CRUXEval-O", "output"), ("CRUXEval-I", "input")):
        of_split = [s for s in samples if s["split"] == split]
        assert len(of_split) == 20 and len({s["id"] for s in of_split}) == 20
        correct = sum(bool(s["correct"]) for s in of_split)
        failures = sum(not s["format_ok"] for s in of_split)
        (line,) = [m for m in SCORE_LINE.findall(first.stdout) if m[0] == label]
        assert line == (label, f"{correct / 20:.3f}", str(correct), "20", f"{(20 - failures) / 20:.3f}",
                        str(failures)), first.stdout
        for sample in of_split:  # a format error is recorded and never run; anything well formed was run
            assert (sample["parse_failure"] is None) == sample["format_ok"]
            assert (sample["exec_status"] is None) == (not sample["format_ok"] or sample["answer"] is None)
            assert sample["correct"] is (sample["exec_status"] == "ok")
    print(f"azr eval cruxeval --model tiny --limit 20 --max-response-tokens 64: {seconds:.1f} s wall")

    second, _ = run_eval(tmp_path)  # default output: <cwd>/runs/eval/cruxeval-tiny-<time>.jsonl
    assert second.returncode == 0, second.stderr[-3000:]
    (default_out,) = (tmp_path / "runs" / "eval").glob("cruxeval-tiny-*.jsonl")
    again = read_samples(default_out)
    assert [(s["id"], s["split"], s["response"], s["answer"]) for s in again] == \
        [(s["id"], s["split"], s["response"], s["answer"]) for s in samples]
    assert second.stdout == first.stdout
