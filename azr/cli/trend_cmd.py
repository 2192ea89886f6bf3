"""`azr trend RUN_DIR`: did the solver's rewards rise? First-k vs last-k steps, and a held-out probe before/after."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from azr.cli.exit_codes import EXIT_BAD_INPUT  # a missing or unreadable metrics or probe file


def _read_jsonl(path: Path) -> list[dict]:
    if not path.is_file():
        typer.echo(f"error: no file {path}", err=True)
        raise typer.Exit(EXIT_BAD_INPUT)
    rows = []
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        if not line.strip():
            continue
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            typer.echo(f"warning: {path} line {number} is not JSON: skipped", err=True)
    return rows


def trend(
    run_dir: Annotated[Path, typer.Argument(help="Run directory holding metrics.jsonl (or the file itself).")],
    window: Annotated[int, typer.Option(min=1, help="k: compare the first k steps with the last k.")] = 10,
    probe: Annotated[tuple[Path, Path] | None, typer.Option(
        help="Two `azr eval` per-sample files of the same rows: before and after.")] = None,
) -> None:
    """Print, per task type, the solver's format-OK share and mean reward over the first k and last k steps, the
    difference, a one-sided permutation p-value and a bootstrap 95% interval; with --probe, accuracy and format-OK
    before/after, rows fixed and broken, and a one-sided sign-test p-value."""
    from services.reporting.trend_test import SERIES, compare_probe
    from services.reporting.trend_test import trend as trend_of

    path = run_dir / "metrics.jsonl" if run_dir.is_dir() else run_dir
    lines = _read_jsonl(path)
    typer.echo(f"{path}: {len(lines)} steps; first {window} vs last {window}")
    typer.echo(f"{'series':28} {'first':>8} {'last':>8} {'diff':>8} {'p (one-sided)':>14}  95% interval")
    for key in SERIES:
        result = trend_of(lines, key, window)
        if result is None:
            typer.echo(f"{key:28} fewer than {2 * window} steps with a value")
            continue
        low, high = result.interval
        exact = "exact" if result.exact else "sampled"
        typer.echo(f"{key:28} {sum(result.first) / window:8.3f} {sum(result.last) / window:8.3f} "
                   f"{result.difference:+8.3f} {result.p_value:9.4f} ({exact})  [{low:+.3f}, {high:+.3f}]")
    if probe is not None:
        before, after = (_read_jsonl(p) for p in probe)
        try:
            comparisons = compare_probe(before, after)
        except ValueError as error:
            typer.echo(f"error: {error}", err=True)
            raise typer.Exit(EXIT_BAD_INPUT) from None
        for c in comparisons:
            typer.echo(f"probe {c.split:7} {c.rows} rows: accuracy {c.correct_before}/{c.rows} -> "
                       f"{c.correct_after}/{c.rows}, format OK {c.format_ok_before} -> {c.format_ok_after}, "
                       f"fixed {c.fixed}, broken {c.broken}, sign test p = {c.p_value:.4f}")
