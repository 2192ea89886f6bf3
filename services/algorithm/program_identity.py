"""When are two buffer entries the same task? Normalised program text and normalised input text (pure, no I/O).

Normalisation parses with `ast` and prints back with `ast.unparse`, dropping comments, docstrings and formatting:
`def f(x):\n  return x  # hi` and `def f(x): return x` normalise (and hash) alike.

Limits, on purpose: this is syntactic identity, not semantic equivalence. Renaming a variable, reordering
statements, adding type hints or writing `x + 1` as `1 + x` all give a different hash. Text that does not parse
(never the case for an executor-validated program) falls back to its stripped source with normalised line endings.
"""

from __future__ import annotations

import ast
import hashlib
import json
from collections.abc import Sequence

from services.algorithm import thread_safe_ast

_DOCSTRING_OWNERS = (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


def _strip_docstrings(tree: ast.AST) -> None:
    """Remove the leading string-constant statement of every module, function and class body (in place)."""
    for node in ast.walk(tree):
        if not isinstance(node, _DOCSTRING_OWNERS):
            continue
        body = node.body
        if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                and isinstance(body[0].value.value, str):
            del body[0]
            if not body and not isinstance(node, ast.Module):
                body.append(ast.Pass())


def _fallback(source: str) -> str:
    return "\n".join(line.rstrip() for line in source.replace("\r\n", "\n").strip().split("\n"))


def normalise_program(source: str) -> str:
    """The program as `ast.unparse` prints it, without comments or docstrings (stripped text if it does not parse)."""
    try:
        tree = thread_safe_ast.parse(source)
        _strip_docstrings(tree)
        return ast.unparse(tree)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return _fallback(source)


def normalise_arguments(source: str) -> str:
    """Argument source text (`'a', 2` as in `f('a', 2)`) printed back by `ast.unparse` (stripped text if it does not
    parse)."""
    try:
        call = thread_safe_ast.parse(f"f({source})", mode="eval").body
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return _fallback(source)
    if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id == "f"):
        # e.g. `1)(2` parses as a call of a call: not one argument list, so keep the text as it is
        return _fallback(source)
    parts = [ast.unparse(argument) for argument in call.args] + [ast.unparse(keyword) for keyword in call.keywords]
    return ", ".join(parts)


def program_hash(source: str) -> str:
    """SHA-256 (hex) of the normalised program."""
    return hashlib.sha256(normalise_program(source).encode("utf-8")).hexdigest()


def _key_of(normalised_program: str, inputs: Sequence[str]) -> str:
    payload = json.dumps([normalised_program, [normalise_arguments(text) for text in inputs]],
                         ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


def entry_key(source: str, inputs: Sequence[str]) -> str:
    """SHA-256 (hex) identifying (normalised program, normalised input(s)): the buffer's de-duplication key.

    A deduction/abduction triplet passes its one input; an induction task passes its N inputs, in order.
    """
    return _key_of(normalise_program(source), inputs)


def program_and_entry_keys(source: str, inputs: Sequence[str]) -> tuple[str, str]:
    """(`program_hash(source)`, `entry_key(source, inputs)`), normalising the program once."""
    normalised = normalise_program(source)
    return hashlib.sha256(normalised.encode("utf-8")).hexdigest(), _key_of(normalised, inputs)
