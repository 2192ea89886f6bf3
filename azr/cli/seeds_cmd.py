"""`azr seeds import FILE.jsonl`: validate seed programs through the executor and store the valid ones. A line that
is not a usable row makes the exit status 2 (bad input; the other rows are still imported)."""

from __future__ import annotations

import sys
from contextlib import ExitStack
from pathlib import Path
from typing import Annotated

import typer

from azr.cli.choices import SandboxBackend, SeedBuffer
from azr.cli.exit_codes import EXIT_BAD_INPUT
from azr.cli.settings_options import cli_settings, command_line_values, setting_option

seeds_app = typer.Typer(help="Seed the buffers.", no_args_is_help=True)


@seeds_app.command("import")
def import_file(
    ctx: typer.Context,
    file: Annotated[Path, typer.Argument(exists=True, dir_okay=False, readable=True,
                                         help="JSONL: the authors' seed format or `azr validate` rows.")],
    buffer: Annotated[SeedBuffer, typer.Option(help="auto: deduction + abduction, or induction for rows with "
                                                    "`inputs`; else that one buffer.")] = SeedBuffer.AUTO,
    database_url: Annotated[str | None, setting_option("database_url", "SQLAlchemy URL of the buffer store.")
                            ] = None,
    backend: Annotated[SandboxBackend | None, setting_option("executor_backend",
                                                                "Sandbox of the in-process executor.")] = None,
) -> None:
    """Validate every row (in-process sandboxes, or RQ jobs when AZR_QUEUE_BACKEND=redis) and store the valid
    ones with source=seed; print a JSON summary (stored, duplicate, rejected by status). Exit status 2 when a line
    could not be read as a row."""
    from azr.factory.parts import code_executor, triplet_store
    from services.store.seed_import import INVALID_ROW, import_seeds

    settings = cli_settings(**command_line_values(ctx, {"backend": "executor_backend"}, database_url=database_url,
                                                  backend=backend))
    with ExitStack() as closers:
        executor = code_executor(settings, closers)
        store = closers.enter_context(triplet_store(settings, create=True))
        summary = import_seeds(file, executor, store, buffer=buffer.value,
                               parallel=settings.executor.executor_workers * 2)
    sys.stdout.write(summary.model_dump_json() + "\n")
    if summary.rejected.get(INVALID_ROW):
        typer.echo(f"{summary.rejected[INVALID_ROW]} row(s) could not be read", err=True)
        raise typer.Exit(EXIT_BAD_INPUT)
