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
    per_step: Annotated[bool, typer.Option(
        help="Also print each step's update diagnostics (gradient norm, entropy, clip fraction, approximate KL) "
             "and which (task type, role) groups carried signal (rewards not all equal), with a count per group; "
             "then how often each format failure, parse failure and executor status occurred.")
    ] = False,
) -> None:
    """Print, per task type, the solver's format-OK share and mean reward over the first k and last k steps, the
    difference, a one-sided permutation p-value and a bootstrap 95% interval; with --probe, accuracy and format-OK
    before/after, rows fixed and broken, and a one-sided sign-test p-value; with --per-step, the diagnosis of
    each step and why responses failed (first k and last k)."""
    from services.reporting.trend_comparison import SERIES, compare_probe
    from services.reporting.trend_comparison import trend as trend_of

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
    from services.reporting.collapse_watch import collapse_warnings

    for warning in collapse_warnings(lines, window):
        typer.echo(warning)
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
                       f"fixed {c.fixed}, broken {c.broken}, sign test p = {c.p_value:.4f}"
                       + (f"; checkpoints {c.version_before} -> {c.version_after}" if c.version_after else ""))
    if per_step:
        print_diagnosis(lines, window)


def print_diagnosis(lines: list[dict], window: int) -> None:
    """One row per step: the update's diagnostics and the groups whose rewards differed; then a count per group;
    then the outcome counts (why responses failed, what their programs did), all steps and first/last k."""
    from services.reporting.run_diagnosis import UPDATE_KEYS, diagnose, outcome_counts, signal_counts

    steps = diagnose(lines)
    names = [key.removeprefix("train/") for key in UPDATE_KEYS]
    typer.echo("\n" + f"{'step':>5} " + " ".join(f"{name:>13}" for name in names) + "  groups with signal")
    for step in steps:
        values = " ".join(f"{value:13.4g}" if value is not None else f"{'-':>13}" for value in step.update.values())
        typer.echo(f"{step.step:5d} {values}  {', '.join(step.signal_groups) or '(none)'}")
    counts = ", ".join(f"{group} {count}" for group, count in signal_counts(steps).items())
    typer.echo(f"steps with signal, of {len(steps)}: {counts}")
    print_collapse_rows(lines)
    outcomes = outcome_counts(lines, window)
    if outcomes:
        typer.echo(f"\n{'outcome (responses)':60} {'all':>5} {f'first {window}':>9} {f'last {window}':>8}")
        for c in outcomes:
            typer.echo(f"{c.key:60} {c.total:5d} {c.first:9d} {c.last:8d}")


def print_collapse_rows(lines: list[dict]) -> None:
    """One row per step of the collapse watch: median lengths, example copies, proposals with a program, groups
    whose spread came from a right answer, valid proposals stored."""
    from services.reporting.collapse_watch import collapse_rows

    def cell(value: float | None, spec: str) -> str:
        return format(value, spec) if value is not None else "-"

    typer.echo("\n" + f"{'step':>5} {'solve length d/a/i':>20} {'propose length d/a/i':>22} {'example copy':>13} "
               f"{'has program':>12} {'correct spread':>15} {'valid':>6}")
    for row in collapse_rows(lines):
        solve = "/".join(cell(v, ".0f") for v in row.solver_lengths)
        propose = "/".join(cell(v, ".0f") for v in row.proposer_lengths)
        typer.echo(f"{row.step:5d} {solve:>20} {propose:>22} {cell(row.example_copy, '.2f'):>13} "
                   f"{cell(row.has_program, '.2f'):>12} {cell(row.correct_spread, 'd'):>15} {row.valid:6d}")
