"""What every process builder returns: the process's started parts, and their closers in one `ExitStack`."""

from __future__ import annotations

from contextlib import ExitStack
from types import TracebackType
from typing import Self


class CannotStart(Exception):
    """The settings ask for what this machine cannot give (an unknown or absent model, an engine that cannot load):
    the commands report it as bad input (exit status 2) with this message, before anything has run."""


class Process:
    """A started process: its parts are attributes of the subclass; `close` (or leaving a `with` block) closes
    everything its builder opened, in reverse order of opening, once."""

    def __init__(self, closers: ExitStack) -> None:
        self.closers = closers

    def close(self) -> None:
        self.closers.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self.close()
