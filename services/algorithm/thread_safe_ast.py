"""`ast.parse` serialised across threads.

CPython 3.11 (before 3.11.8/3.12.1, gh-106905) keeps the AST-to-object conversion's recursion depth in shared
state: two threads parsing at once can fail with `SystemError: AST constructor recursion depth mismatch`. Our
parsers run on thread pools (the executor's request threads, the coordinator, the APIs), so every `ast.parse` in
the project goes through this lock. Parsing is microseconds to milliseconds; the lock costs nothing measurable.

The sources parsed here are model-written or user-submitted programs: the warnings the parser and compiler raise
about them (`invalid escape sequence '\\d'`, `"is" with a literal`) are about that text, not this process, so they are
not printed (a program is judged by running it). Silenced under the same lock: `warnings.catch_warnings` swaps
process-wide state.
"""

from __future__ import annotations

import ast
import threading
import types
import warnings
from typing import Any, Literal

_PARSE_LOCK = threading.Lock()


def parse(source: str, filename: str = "<unknown>", mode: Literal["exec", "eval", "single"] = "exec",
          **kwargs: Any) -> Any:
    """`ast.parse` under a process-wide lock (same arguments, same exceptions), the source's warnings not printed."""
    with _PARSE_LOCK, warnings.catch_warnings():
        warnings.simplefilter("ignore", SyntaxWarning)
        warnings.simplefilter("ignore", DeprecationWarning)
        return ast.parse(source, filename, mode, **kwargs)


def compile_tree(tree: ast.Module | ast.Expression | ast.Interactive, filename: str,
                 mode: Literal["exec", "eval", "single"]) -> types.CodeType:
    """`compile` of a parsed tree (compile-time errors: 'return' outside a function) under the same lock, its
    warnings not printed."""
    with _PARSE_LOCK, warnings.catch_warnings():
        warnings.simplefilter("ignore", SyntaxWarning)
        warnings.simplefilter("ignore", DeprecationWarning)
        return compile(tree, filename, mode, dont_inherit=True)
