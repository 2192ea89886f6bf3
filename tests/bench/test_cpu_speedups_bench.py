"""bench/cpu_speedups.py runs end to end (tiny model) and prints its two tables with a ratio per row."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]


def test_the_bench_prints_generation_and_update_ratios() -> None:
    out = subprocess.run([sys.executable, str(REPO_ROOT / "bench" / "cpu_speedups.py"), "--model", "tiny",
                          "--rows", "1", "--new-tokens", "6", "--repeats", "1", "--prompt-len", "24",
                          "--response-len", "12"],
                         capture_output=True, text=True, timeout=600, cwd=REPO_ROOT)
    assert out.returncode == 0, out.stderr[-2000:]
    rows = [line for line in out.stdout.splitlines() if re.search(r"\| [\d.]+x \|$", line)]
    assert [row.split("|")[1].strip() for row in rows] == [
        "prefill", "decoding step", "1 thread(s), float32", "2 thread(s), float32", "2 thread(s), bf16 autocast"]
    assert rows[2].endswith("| 1.00x |")  # the baseline against itself


def test_the_update_alone_with_lora_adapters() -> None:
    out = subprocess.run([sys.executable, str(REPO_ROOT / "bench" / "cpu_speedups.py"), "--model", "tiny",
                          "--skip-generation", "--lora-rank", "4", "--repeats", "1", "--prompt-len", "24",
                          "--response-len", "12"],
                         capture_output=True, text=True, timeout=600, cwd=REPO_ROOT)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "prefill" not in out.stdout and "| update, LoRA r = 4 (6 episodes" in out.stdout
    rows = [line for line in out.stdout.splitlines() if re.search(r"\| [\d.]+x \|$", line)]
    assert [row.split("|")[1].strip() for row in rows] == [
        "1 thread(s), float32", "2 thread(s), float32", "2 thread(s), bf16 autocast"]
