"""The exit statuses of every `azr` command, one convention for all of them.

- 0 (EXIT_OK): done.
- 1 (EXIT_FAILURE): a runtime failure: a server, database or device that failed while working, an unexpected error
  (Python's own traceback exit), or a run that could not finish.
- 2 (EXIT_BAD_INPUT): usage or bad input: an unknown option or choice (click's own status), invalid settings or
  config file, a missing or malformed input file or row, an unknown or absent model. The reason is on stderr.
"""

from __future__ import annotations

import typer

EXIT_OK = 0
"""Done."""
EXIT_FAILURE = 1
"""A runtime failure (what the command needed broke while it worked)."""
EXIT_BAD_INPUT = 2
"""Usage or bad input: the same status as click's usage errors."""


def bad_input(message: str) -> typer.Exit:
    """Print `error: message` on stderr; the caller raises the returned Exit (status 2)."""
    typer.echo(f"error: {message}", err=True)
    return typer.Exit(EXIT_BAD_INPUT)


def runtime_failure(message: str) -> typer.Exit:
    """Print `error: message` on stderr; the caller raises the returned Exit (status 1)."""
    typer.echo(f"error: {message}", err=True)
    return typer.Exit(EXIT_FAILURE)
