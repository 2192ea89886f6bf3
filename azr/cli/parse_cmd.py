"""`azr parse`: read model responses by the reading rules and say, per response, what the reward code sees."""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path
from typing import Annotated

import typer

from azr.cli.exit_codes import EXIT_BAD_INPUT  # a missing file, or some row malformed or of unknown kind
from services.algorithm.task_types import Role, TaskType


def parse(
    file: Annotated[Path, typer.Argument(help="JSONL: one object per line with `text`, and `kind` "
                                              "(e.g. propose_deduction) unless --role and --task-type say it.")],
    role: Annotated[Role | None, typer.Option(help="Role of every row without a `kind`.")] = None,
    task_type: Annotated[TaskType | None, typer.Option(help="Task type of every row without a `kind`.")] = None,
    num_inputs: Annotated[int, typer.Option(min=1, help="N: inputs an induction proposal must write.")] = 10,
    allow_multiple_functions: Annotated[bool, typer.Option(
        help="Accept a proposed program with more than one `def` (default: refused, the authors' Qwen setting).")
    ] = False,
    out: Annotated[Path | None, typer.Option(help="Write the rows here instead of standard output.")] = None,
) -> None:
    """One JSON row per input row: format_ok, failure (format_failure, extraction_failure), the reward when the
    text decides it (-1, else null: the executor must run), the <answer> text and what was extracted (program and
    input, inputs and message, predicted output or input, or the program). A summary goes to standard error."""
    from services.algorithm.parsing import read_response
    from services.jsonl_rows import read_jsonl_rows
    from services.reporting.response_reading import parse_kind, reading_row

    if not file.is_file():
        typer.echo(f"error: no file {file}", err=True)
        raise typer.Exit(EXIT_BAD_INPUT)
    rows, bad = [], 0
    for line, row, problem in read_jsonl_rows(file):
        try:
            if problem is not None or row is None:
                raise ValueError(problem or "not an object")
            text = row.get("text")
            if not isinstance(text, str):
                raise ValueError("no string field `text`")
            if "kind" in row:
                group = parse_kind(str(row["kind"]))
            elif role is not None and task_type is not None:
                group = (task_type, role)
            else:
                raise ValueError("no `kind` field: give --role and --task-type")
        except ValueError as error:  # reported and skipped; the other rows are still read
            typer.echo(f"error: {file} line {line}: {str(error).removeprefix(f'line {line}: ')}", err=True)
            bad += 1
            continue
        reading = read_response(group[0], group[1], text, num_inputs=num_inputs,
                                reject_multiple_functions=not allow_multiple_functions)
        result = {"line": line, **reading_row(reading)}
        if "finish_reason" in row:
            result["finish_reason"] = row["finish_reason"]
        rows.append(result)
    stream = out.open("w") if out is not None else sys.stdout
    try:
        for result in rows:
            stream.write(json.dumps(result) + "\n")
    finally:
        if out is not None:
            stream.close()
    summary: Counter[str] = Counter()
    for result in rows:
        summary[f"{result['kind']}: rows"] += 1
        summary[f"{result['kind']}: format_ok"] += int(result["format_ok"])
        summary[f"{result['kind']}: extractable"] += int(result["extractable"])
        if result["failure"]:
            summary[f"{result['kind']}: failure {result['failure']}"] += 1
    for key in sorted(summary):
        typer.echo(f"{key} {summary[key]}", err=True)
    if bad:
        typer.echo(f"{bad} row(s) could not be read (see above)", err=True)
        raise typer.Exit(EXIT_BAD_INPUT)
