"""`azr plot RUN_DIR [--out DIR]`: PNG figures of a run's `metrics.jsonl` (default into RUN_DIR/plots/)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from azr.cli.exit_codes import EXIT_BAD_INPUT

EXIT_NO_METRICS = EXIT_BAD_INPUT
"""Exit status when the run directory has no metrics file or no usable line in it (bad input, status 2)."""


def plot(
    run_dir: Annotated[Path, typer.Argument(help="Run directory holding metrics.jsonl (e.g. runs/default).")],
    out: Annotated[Path | None, typer.Option(help="Where to write the PNGs (default: RUN_DIR/plots).")] = None,
) -> None:
    """Draw rewards, response lengths, proposal validity and buffer growth, task complexity/diversity (Fig 27) and
    CRUXEval accuracy over steps; print each path written. Unreadable lines (a write cut short) are skipped with a
    warning; no metrics file, or no usable line, exits with status 2."""
    from services.reporting.plots import write_figures
    from services.reporting.run_metrics import MetricsFileError, load_run_metrics

    try:
        run = load_run_metrics(run_dir)
    except MetricsFileError as error:
        typer.echo(f"error: {error}", err=True)
        raise typer.Exit(EXIT_NO_METRICS) from None
    for skipped in run.skipped:
        typer.echo(f"warning: {run.path} line {skipped.line_number} skipped: {skipped.reason}", err=True)
    report = write_figures(run, out if out is not None else run_dir / "plots")
    for name, reason in report.not_written.items():
        typer.echo(f"{name} not written: {reason}")
    for path in report.written:
        typer.echo(str(path))
