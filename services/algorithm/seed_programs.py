"""Seed programs are stripped of comments and global variables (§3.3.1, App. C). Pure.

"All seed triplet's programs are stripped of global variables and comments, but subsequent iterations of adding new
triplets to the buffers are unaltered." The authors' seeding does it in two passes over the AST, before the program
is validated: drop the leading string-constant statements (docstrings) of the module, every class and every
function, then keep only the module's imports, function and class definitions; the program is written back with
`ast.unparse` (which drops comments) and without blank lines. We do the same in one pass, except that a body whose
only statement is a docstring keeps it (the authors would write an empty body, which does not parse; such a
function returns None and is refused either way).
"""

from __future__ import annotations

import ast

from services.algorithm import thread_safe_ast

__all__ = ["strip_seed_program"]

_KEPT_AT_TOP = (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
_WITH_BODY = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)


def _is_docstring(statement: ast.stmt) -> bool:
    return (isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Constant)
            and isinstance(statement.value.value, str))


def strip_seed_program(source: str) -> str:
    """`source` without docstrings, comments, blank lines and top-level statements other than imports and
    definitions; `source` itself when it does not parse (the executor then reports its syntax error)."""
    try:
        tree = thread_safe_ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError, OverflowError, Warning):
        return source
    for node in ast.walk(tree):
        if isinstance(node, _WITH_BODY):
            while len(node.body) > 1 and _is_docstring(node.body[0]):
                node.body.pop(0)
    tree.body = [statement for statement in tree.body if isinstance(statement, _KEPT_AT_TOP)]
    try:
        text = ast.unparse(tree)
    except (ValueError, RecursionError):  # deeply nested code: keep it as written
        return source
    return "\n".join(line for line in text.split("\n") if line.strip())
