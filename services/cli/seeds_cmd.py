"""`azr seeds import FILE.jsonl`: validate seed programs through the executor and store the valid ones."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Optional, get_args

import typer

from services.settings import Settings

seeds_app = typer.Typer(help="Seed the buffers.", no_args_is_help=True)


@seeds_app.command("import")
def import_file(
    file: Annotated[Path, typer.Argument(exists=True, dir_okay=False, readable=True,
                                         help="JSONL: the authors' seed format or `azr validate` rows.")],
    buffer: Annotated[str, typer.Option(help="auto (deduction+abduction, or induction for rows with `inputs`) "
                                             "| deduction | abduction | induction.")] = "auto",
    database_url: Annotated[Optional[str], typer.Option(help="SQLAlchemy URL (default: AZR_DATABASE_URL, "
                                                             "else the profile's).")] = None,
    backend: Annotated[Optional[str], typer.Option(help="Sandbox of the in-process executor: process | docker "
                                                        "(default: the profile's).")] = None,
) -> None:
    """Validate every row (in-process sandboxes, or RQ jobs when AZR_QUEUE_BACKEND=redis) and store the valid
    ones with source=seed; print a JSON summary (stored, duplicate, rejected by status). Exit 1 when a line
    could not be read as a row."""
    from services.cli.serve_cmd import build_code_executor
    from services.store import open_store
    from services.store.seed_import import INVALID_ROW, BufferChoice, import_seeds

    if buffer not in get_args(BufferChoice):
        raise typer.BadParameter("must be auto, deduction, abduction or induction", param_hint="--buffer")
    if backend not in (None, "process", "docker"):
        raise typer.BadParameter("must be process or docker", param_hint="--backend")
    overrides = {"database_url": database_url, "executor_backend": backend}
    settings = Settings(**{key: value for key, value in overrides.items() if value is not None})
    executor = build_code_executor(settings)
    try:
        with open_store(settings.database_url, buffer_cap=settings.buffer_cap, create=True) as store:
            summary = import_seeds(file, executor, store, buffer=buffer,  # type: ignore[arg-type]
                                   parallel=settings.executor_workers * 2)
    finally:
        close = getattr(executor, "close", None)
        if callable(close):
            close()
    sys.stdout.write(summary.model_dump_json() + "\n")
    if summary.rejected.get(INVALID_ROW):
        typer.echo(f"{summary.rejected[INVALID_ROW]} row(s) could not be read", err=True)
        raise typer.Exit(1)
