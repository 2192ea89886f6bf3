"""`azr plot` through its typer app, in-process (the real subprocess is in test_plot_e2e.py): exit 2 without metrics,
a truncated line skipped with a warning, the paths written printed, `--out`, and the CRUXEval message."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from azr.cli.main import app
from tests.services.reporting.png_checks import assert_real_figure
from tests.services.reporting.synthetic_metrics import metrics_line, write_run


def test_a_run_without_metrics_exits_2_with_a_reason(tmp_path: Path) -> None:
    runner = CliRunner()
    missing_dir = runner.invoke(app, ["plot", str(tmp_path / "nope")])
    assert missing_dir.exit_code == 2 and "is not a directory" in missing_dir.stderr
    no_file = runner.invoke(app, ["plot", str(tmp_path)])
    assert no_file.exit_code == 2 and "metrics.jsonl not found" in no_file.stderr
    (tmp_path / "metrics.jsonl").write_text("\n")
    empty = runner.invoke(app, ["plot", str(tmp_path)])
    assert empty.exit_code == 2 and "no usable step line" in empty.stderr
    (tmp_path / "metrics.jsonl").write_text('{"step": 1, "reward/deduction/propose": -0.')
    truncated_only = runner.invoke(app, ["plot", str(tmp_path)])
    assert truncated_only.exit_code == 2 and "1 unreadable" in truncated_only.stderr
    assert not (tmp_path / "plots").exists()


def test_a_truncated_last_line_is_skipped_with_a_warning(tmp_path: Path) -> None:
    run_dir = write_run(tmp_path / "run", [metrics_line(step, with_task_metrics=False) for step in (1, 2, 3)],
                        trailing='{"step": 4, "reward/deduction/propose": -0.')
    out = tmp_path / "figures"
    completed = CliRunner().invoke(app, ["plot", str(run_dir), "--out", str(out)])
    assert completed.exit_code == 0, completed.output
    assert "warning:" in completed.stderr and "line 4 skipped" in completed.stderr
    printed = completed.stdout.splitlines()
    expected = [str(out / name) for name in ("rewards.png", "format_ok.png", "response_length.png", "proposals.png")]
    assert [line for line in printed if line.endswith(".png")] == expected
    assert "cruxeval.png not written: no CRUXEval evaluation in this run" in printed
    for path in expected:
        assert_real_figure(Path(path))
    assert not (run_dir / "plots").exists(), "--out must replace the default directory"
