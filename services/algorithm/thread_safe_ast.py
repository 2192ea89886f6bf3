"""`ast.parse` serialised across threads.

CPython 3.11 (before 3.11.8/3.12.1, gh-106905) keeps the AST-to-object conversion's recursion depth in shared
state: two threads parsing at once can fail with `SystemError: AST constructor recursion depth mismatch`. Our
parsers run on thread pools (the executor's request threads, the coordinator, the APIs), so every `ast.parse` in
the project goes through this lock. Parsing is microseconds to milliseconds; the lock costs nothing measurable.
"""

from __future__ import annotations

import ast
import threading
from typing import Any, Literal

_PARSE_LOCK = threading.Lock()


def parse(source: str, filename: str = "<unknown>", mode: Literal["exec", "eval", "single"] = "exec",
          **kwargs: Any) -> Any:
    """`ast.parse` under a process-wide lock (same arguments, same exceptions)."""
    with _PARSE_LOCK:
        return ast.parse(source, filename, mode, **kwargs)
