"""`azr samples RUN_DIR`: verbatim responses of a run's first and last steps and its self-proposed tasks, as Markdown
(services/reporting/run_samples.py), read from the run's store. The record of a run commits its output."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from azr.cli.exit_codes import bad_input


def samples(
    run_dir: Annotated[Path, typer.Argument(help="Run directory of an embedded run (holds buffers.sqlite3).")],
    window: Annotated[int, typer.Option(min=1, help="The first and the last N steps.")] = 20,
    per_role: Annotated[int, typer.Option(min=1, help="Responses shown per role and window.")] = 10,
    tasks: Annotated[int, typer.Option(min=0, help="Self-proposed tasks shown (all are counted).")] = 20,
    out: Annotated[Path | None, typer.Option(help="Write the Markdown here instead of printing it.")] = None,
) -> None:
    """Per role (propose, solve), ten verbatim responses from the first and the last steps with their rewards,
    format verdicts and executor statuses; then the self-proposed tasks that entered the buffers, counted per
    buffer, those that reuse a seed program counted apart."""
    from sqlalchemy import create_engine, select

    from services.reporting.run_samples import samples_markdown
    from services.store.schema import buffer_entries, episodes

    database = run_dir / "buffers.sqlite3"
    if not database.is_file():
        raise bad_input(f"{run_dir} has no buffers.sqlite3 (an embedded run's directory holds one)")
    engine = create_engine(f"sqlite:///{database.resolve()}")
    try:
        with engine.connect() as connection:
            payloads = [row.payload for row in connection.execute(select(episodes.c.payload))]
            entries = [dict(row._mapping) for row in connection.execute(select(buffer_entries))]
    finally:
        engine.dispose()
    if not payloads:
        raise bad_input(f"{run_dir} has no episodes yet")
    text = samples_markdown(payloads, entries, window=window, per_role=per_role, shown_tasks=tasks)
    if out is None:
        typer.echo(text)
    else:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text)
        typer.echo(f"{out}: {len(payloads)} episodes read")
