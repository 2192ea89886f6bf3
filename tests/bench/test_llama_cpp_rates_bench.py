"""bench/llama_cpp_rates.py on the tiny model: its random adapter loads into llama.cpp over the model's GGUF (a wrong
shape or name would be refused), and the script's table and record hold a rate per form and row count."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO_ROOT))  # bench/ is a directory of scripts, not an installed package

from services.inference import llama_cpp_runtime  # noqa: E402

pytestmark = pytest.mark.skipif(llama_cpp_runtime.available() is not None,
                                reason=str(llama_cpp_runtime.available()))


def test_rates_per_form_and_row_count(tmp_path: Path) -> None:
    out = tmp_path / "rates.json"
    finished = subprocess.run([sys.executable, str(REPO_ROOT / "bench" / "llama_cpp_rates.py"), "--model", "tiny",
                               "--forms", "release", "f16", "--rows", "1", "3", "--steps", "2", "--prompt-tokens", "64",
                               "--out", str(out)], capture_output=True, text=True, timeout=300, cwd=REPO_ROOT)
    assert finished.returncode == 0, finished.stderr[-2000:]
    record = json.loads(out.read_text())
    assert record["prompt_tokens"] == 64 and record["int8_ceiling"] > 0
    assert [row["form"] for row in record["results"]] == ["release", "f16"]
    for row in record["results"]:
        assert row["prefill_tokens_per_s"] > 0
        assert sorted(row["decode_s_per_step"]) == ["1", "3"] and min(row["decode_s_per_step"].values()) > 0
    table = [line for line in finished.stdout.splitlines() if line.startswith("| ")]
    assert len(table) == 3 and table[1].startswith("| release |") and "1.00x / 1.00x" in table[1]
