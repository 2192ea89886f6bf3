"""Concurrent parsing never trips CPython 3.11's shared AST recursion counter (gh-106905)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from services.algorithm.program_identity import normalise_program
from services.algorithm.thread_safe_ast import parse

DEEP = "def f(x):\n    return " + "(" * 90 + "x" + ")" * 90


def test_parallel_parses_of_nested_programs_all_succeed() -> None:
    with ThreadPoolExecutor(max_workers=8) as pool:
        trees = list(pool.map(lambda _: parse(DEEP), range(400)))
        normalised = set(pool.map(lambda _: normalise_program(DEEP), range(400)))
    assert all(tree.body[0].name == "f" for tree in trees)
    assert len(normalised) == 1
