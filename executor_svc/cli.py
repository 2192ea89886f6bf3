"""`azr validate FILE.jsonl` and `azr worker executor`: the executor from the command line."""

from __future__ import annotations

import json
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from services.jsonl_rows import read_jsonl_rows
from services.settings import Settings

worker_app = typer.Typer(help="Run queue workers.", no_args_is_help=True)

INVALID_ROW = "invalid_row"
"""Status printed for an input line that is not a usable row (the run goes on; the exit code is then 1)."""


def validate_row(executor: Any, number: int, row: dict[str, Any], task: str | None) -> dict[str, Any]:
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
        result = executor.validate_induction(program, inputs)
        return {"id": row_id, "status": result.status.value, "outputs": result.outputs, "error": result.error, "ms": round(result.ms, 2)}
    argument = row.get("input")
    if not isinstance(argument, str):
        return {"id": row_id, "status": INVALID_ROW, "error": "row has no `input` string"}
    result = executor.validate_proposal(program, argument)
    return {"id": row_id, "status": result.status.value, "output": result.output, "error": result.error, "ms": round(result.ms, 2)}


def validate(
    file: Annotated[Path, typer.Argument(exists=True, dir_okay=False, readable=True, help="JSONL rows to validate.")],
    task: Annotated[Optional[str], typer.Option(help="deduction | abduction | induction (default: from each row).")] = None,
    backend: Annotated[Optional[str], typer.Option(help="process | docker (default: the profile's).")] = None,
    workers: Annotated[Optional[int], typer.Option(help="Sandbox workers (default: settings).")] = None,
) -> None:
    """Validate every row of FILE through the sandbox; print one JSON line per row to stdout."""
    from executor_svc.executor import Executor

    if task not in (None, "deduction", "abduction", "induction"):
        raise typer.BadParameter("must be deduction, abduction or induction", param_hint="--task")
    overrides = {"executor_backend": backend, "executor_workers": workers}
    settings = Settings(**{k: v for k, v in overrides.items() if v is not None})
    bad_rows = 0
    with Executor.from_settings(settings) as executor, ThreadPoolExecutor(max_workers=settings.executor_workers * 2) as pool:
        futures = []
        for number, row, problem in read_jsonl_rows(file):
            if row is None:
                futures.append(pool.submit(lambda n=number, p=problem: {"id": n, "status": INVALID_ROW, "error": p}))
            else:
                futures.append(pool.submit(validate_row, executor, number, row, task))
        for future in futures:  # in input order
            line = future.result()
            bad_rows += line["status"] == INVALID_ROW
            sys.stdout.write(json.dumps(line) + "\n")
    if bad_rows:
        typer.echo(f"{bad_rows} row(s) could not be read", err=True)
        raise typer.Exit(1)


@worker_app.command("executor")
def executor_worker(
    burst: Annotated[bool, typer.Option(help="Exit when the queue is empty.")] = False,
    name: Annotated[Optional[str], typer.Option(help="Worker name (default: RQ's).")] = None,
    maintenance_interval_s: Annotated[int, typer.Option(help="How often abandoned jobs are looked for and retried.")] = 10,
    queue: Annotated[Optional[str], typer.Option(help="RQ queue to serve (default: AZR_EXECUTOR_QUEUE).")] = None,
) -> None:
    """Serve executor jobs from the RQ queue `executor` with one long-lived sandbox pool."""
    import redis
    from rq import Queue

    from executor_svc.executor import Executor
    from executor_svc.jobs import install_executor
    from executor_svc.prometheus_metrics import ExecutorMetrics
    from executor_svc.rq_worker import ExecutorWorker
    from services.metrics_endpoint import serve_metrics

    settings = Settings()
    connection = redis.Redis.from_url(settings.redis_url)
    # Jobs run in this process (SimpleWorker), so the executor records into this process's registry.
    metrics = ExecutorMetrics()
    endpoint = serve_metrics(metrics.registry, settings.executor_metrics_port, settings.metrics_address)
    executor = Executor.from_settings(settings, metrics=metrics)
    install_executor(executor)
    worker = ExecutorWorker(
        [Queue(queue or settings.executor_queue, connection=connection)],
        connection=connection,
        name=name,
        maintenance_interval=maintenance_interval_s,
    )
    try:
        worker.work(burst=burst, with_scheduler=False)
    finally:
        install_executor(None)
        executor.close()
        if endpoint is not None:
            endpoint.close()
