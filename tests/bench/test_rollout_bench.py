"""bench/rollout.py: the split arithmetic and progress-line timing (fast), and one real embedded step with the tiny
model whose printed table must have every phase, shares summing to 100% and a verdict that matches its figures."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from services.coordinator.loop import summarise

REPO_ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO_ROOT))  # bench/ is a directory of scripts, not an installed package

from bench.rollout_table import (  # noqa: E402
    PHASE_LABELS,
    ProgressClock,
    mean_split,
    split_from_metrics,
    split_table,
    splits_from_run,
)

EMBEDDED_PHASES = ("generation", "executor", "store_queue", "training", "other", "outside")


def metrics_line(step: int, **seconds: float) -> dict[str, float]:
    """A metrics line carrying only the step number and `time/<phase>` keys."""
    return {"step": step, **{f"time/{k}": v for k, v in seconds.items()}}


def test_split_adds_the_time_outside_the_step_timer_and_computes_the_overhead() -> None:
    line = metrics_line(1, generation=6.0, executor=0.5, store_queue=0.25, other=0.25, total=7.0, training=2.0)
    split = split_from_metrics(line, wall_s=10.0)
    assert split.seconds["outside"] == pytest.approx(1.0)  # 10 s wall − (7 s step timer + 2 s training)
    assert split.wall == pytest.approx(10.0)
    assert split.overhead == pytest.approx(0.2)  # (10 − 6 − 2) / 10
    assert sum(split.share(p) for p in EMBEDDED_PHASES) == pytest.approx(1.0)
    # Without an outside timing the line's own total (plus training) is the wall time.
    assert split_from_metrics(line).wall == pytest.approx(9.0)


def test_progress_clock_recognises_the_loops_lines_and_measures_the_wait_between_steps() -> None:
    clock = ProgressClock()
    clock.observe(1.0, "step 1: propose → validate → solve (policy v0)")
    clock.observe(4.0, summarise({"step": 1, "time/total": 2.5}))
    clock.observe(6.5, "step 2: propose → validate → solve (policy v1)")
    clock.observe(9.0, summarise({"step": 2, "time/total": 2.0}))
    assert clock.wall(1) == pytest.approx(3.0) and clock.wall(2) == pytest.approx(2.5)
    assert clock.waited(1) is None and clock.waited(2) == pytest.approx(2.5)
    splits = splits_from_run([metrics_line(1, generation=2.0, other=0.5, total=2.5),
                              metrics_line(2, generation=1.0, other=1.0, total=2.0)], clock)
    assert [s.seconds["outside"] for s in splits] == pytest.approx([0.5, 0.5])
    assert [s.waited_s for s in splits] == [None, pytest.approx(2.5)]
    mean = mean_split(splits)
    assert mean.wall == pytest.approx(2.75) and mean.seconds["generation"] == pytest.approx(1.5)


def test_table_marks_rows_against_the_ten_percent_target() -> None:
    fast = split_from_metrics(metrics_line(1, generation=9.5, other=0.5, total=10.0))
    slow = split_from_metrics(metrics_line(2, generation=5.0, executor=5.0, total=10.0))
    rows = split_table([fast, slow], EMBEDDED_PHASES).splitlines()
    assert rows[2].startswith("| 1 |") and rows[2].endswith("| 5.0% | PASS |")
    assert rows[3].startswith("| 2 |") and rows[3].endswith("| 50.0% | FAIL |")
    assert rows[4].startswith("| **mean** |") and rows[4].endswith("| 27.5% | FAIL |")


def parse_table(output: str) -> tuple[list[str], list[list[str]]]:
    """The first markdown table of `output`: header cells and data rows."""
    rows = [line for line in output.splitlines() if line.startswith("| ")]
    cells = [[cell.strip() for cell in row.strip("|").split("|")] for row in rows]
    return cells[0], [row for row in cells[2:]]


@pytest.mark.slow
def test_one_embedded_step_with_tiny_prints_every_phase_summing_to_the_step(shared_dir: Path) -> None:
    completed = subprocess.run(
        [sys.executable, str(REPO_ROOT / "bench" / "rollout.py"), "embedded", "--model", "tiny", "--steps", "1",
         "--batch-size", "1", "--max-response-tokens", "16", "--learnability-samples", "2", "--seed-rows", "16",
         "--executor-workers", "1"],
        capture_output=True, text=True, timeout=900, cwd=REPO_ROOT)
    assert completed.returncode == 0, completed.stderr[-4000:]
    output = completed.stdout
    assert "steps timed from the loop's progress lines: 1 of 1" in output, output
    header, rows = parse_table(output)
    for phase in EMBEDDED_PHASES:
        assert f"{PHASE_LABELS[phase]} s (%)" in header, header
    assert [row[0] for row in rows] == ["1", "**mean**"]
    phase_columns = [header.index(f"{PHASE_LABELS[p]} s (%)") for p in EMBEDDED_PHASES]
    for row in rows:
        figures = [re.fullmatch(r"([\d.]+) \(([\d.]+)%\)", row[i]) for i in phase_columns]
        assert all(figures), row
        seconds = [float(f.group(1)) for f in figures if f]
        shares = [float(f.group(2)) for f in figures if f]
        assert sum(shares) == pytest.approx(100.0, abs=0.5), row
        wall = float(row[header.index("step wall s")])
        assert wall > 0 and sum(seconds) == pytest.approx(wall, abs=0.05), row
        assert seconds[EMBEDDED_PHASES.index("training")] > 0, row  # the in-process update ran inside the step
        overhead = float(row[-2].rstrip("%"))
        generation, training = (shares[EMBEDDED_PHASES.index(p)] for p in ("generation", "training"))
        assert overhead == pytest.approx(100.0 - generation - training, abs=0.5), row
        assert row[-1] == ("PASS" if overhead < 10.0 else "FAIL"), row
