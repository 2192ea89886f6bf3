"""`azr validate FILE.jsonl` and `azr worker executor` (the RQ worker of the pipeline's executor jobs): the executor
from the command line. Its debugging HTTP API is `azr serve executor-debug` (azr/cli/serve_cmd.py)."""

from __future__ import annotations

import functools
import json
import sys
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from pathlib import Path
from typing import Annotated

import typer

from azr.cli.choices import SandboxBackend
from azr.cli.exit_codes import EXIT_BAD_INPUT
from azr.cli.settings_options import cli_settings, command_line_values, setting_option
from services.algorithm.task_types import TaskType
from services.json_types import JsonObject
from services.jsonl_rows import read_jsonl_rows
from services.ports import CodeExecutor

worker_app = typer.Typer(help="Run queue workers.", no_args_is_help=True)

INVALID_ROW = "invalid_row"
"""Status printed for an input line that is not a usable row (the run goes on; the exit status is then 2)."""


def invalid_row(number: int, problem: str | None) -> JsonObject:
    """The result line of an input line that is not a usable row."""
    return {"id": number, "status": INVALID_ROW, "error": problem}


def validate_row(executor: CodeExecutor, number: int, row: JsonObject, task: str | None) -> JsonObject:
    """Validate one seed/validate-format row: `code`|`snippet` with `input` (or `inputs` for induction)."""
    row_id = row.get("id", number)
    program = row.get("code", row.get("snippet"))
    if not isinstance(program, str):
        return {"id": row_id, "status": INVALID_ROW, "error": "row has no `code` or `snippet` string"}
    wants_induction = task == "induction" or (task is None and "inputs" in row and "input" not in row)
    if wants_induction:
        inputs = row.get("inputs")
        if not isinstance(inputs, list) or not inputs or not all(isinstance(i, str) for i in inputs):
            return {"id": row_id, "status": INVALID_ROW, "error": "induction row needs `inputs`: a list of strings"}
        induction = executor.validate_induction(program, inputs)
        return {"id": row_id, "status": induction.status.value, "outputs": induction.outputs, "error": induction.error,
                "ms": round(induction.ms, 2)}
    argument = row.get("input")
    if not isinstance(argument, str):
        return {"id": row_id, "status": INVALID_ROW, "error": "row has no `input` string"}
    result = executor.validate_proposal(program, argument)
    return {"id": row_id, "status": result.status.value, "output": result.output, "error": result.error,
            "ms": round(result.ms, 2)}


def validate(
    ctx: typer.Context,
    file: Annotated[Path, typer.Argument(exists=True, dir_okay=False, readable=True, help="JSONL rows to validate.")],
    task: Annotated[TaskType | None, typer.Option(help="Task type of every row (default: from each row).")] = None,
    backend: Annotated[SandboxBackend | None, setting_option("executor_backend", "Sandbox.")] = None,
    workers: Annotated[int | None, setting_option("executor_workers", "Sandbox workers.", min=1)] = None,
) -> None:
    """Validate every row of FILE through the sandbox; print one JSON line per row to stdout. Exit status 2 when a
    line was not a usable row (the others are still validated)."""
    from azr.factory.parts import local_executor

    settings = cli_settings(**command_line_values(ctx, {"backend": "executor_backend", "workers": "executor_workers"},
                                                  backend=backend, workers=workers))
    task_name = task.value if task is not None else None
    bad_rows = 0
    with ExitStack() as closers:
        executor = local_executor(settings, closers)
        pool = closers.enter_context(ThreadPoolExecutor(max_workers=settings.executor.executor_workers * 2))
        futures = []
        for number, row, problem in read_jsonl_rows(file):
            if row is None:
                futures.append(pool.submit(functools.partial(invalid_row, number, problem)))
            else:
                futures.append(pool.submit(validate_row, executor, number, row, task_name))
        for future in futures:  # in input order
            line = future.result()
            bad_rows += line["status"] == INVALID_ROW
            sys.stdout.write(json.dumps(line) + "\n")
    if bad_rows:
        typer.echo(f"{bad_rows} row(s) could not be read", err=True)
        raise typer.Exit(EXIT_BAD_INPUT)


@worker_app.command("executor")
def executor_worker(
    ctx: typer.Context,
    burst: Annotated[bool, typer.Option(help="Exit when the queue is empty.")] = False,
    name: Annotated[str | None, typer.Option(help="Worker name (default: RQ's).")] = None,
    maintenance_interval_s: Annotated[int, typer.Option(
        help="How often abandoned jobs are looked for and retried.")] = 10,
    queue: Annotated[str | None, setting_option("executor_queue", "RQ queue to serve.")] = None,
) -> None:
    """Serve the pipeline's executor jobs from the RQ queue `executor` with one long-lived sandbox pool."""
    from azr.factory.executor_worker import open_executor_worker

    settings = cli_settings(**command_line_values(ctx, {"queue": "executor_queue"}, queue=queue))
    open_executor_worker(settings, name=name, maintenance_interval_s=maintenance_interval_s).run(burst=burst)
