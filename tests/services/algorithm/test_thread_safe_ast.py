"""Concurrent parsing never trips CPython 3.11's shared AST recursion counter (gh-106905); a parsed program's own
warnings stay out of the process's output."""

from __future__ import annotations

import warnings
from concurrent.futures import ThreadPoolExecutor

import pytest

from services.algorithm.program_identity import normalise_program
from services.algorithm.static_check import check_program
from services.algorithm.thread_safe_ast import compile_tree, parse
from services.execution import ExecStatus

DEEP = "def f(x):\n    return " + "(" * 90 + "x" + ")" * 90


def test_parallel_parses_of_nested_programs_all_succeed() -> None:
    with ThreadPoolExecutor(max_workers=8) as pool:
        trees = list(pool.map(lambda _: parse(DEEP), range(400)))
        normalised = set(pool.map(lambda _: normalise_program(DEEP), range(400)))
    assert all(tree.body[0].name == "f" for tree in trees)
    assert len(normalised) == 1


def test_a_programs_own_warnings_are_not_printed_and_its_errors_still_raise() -> None:
    """`'\\d'` and `x is 1` make the parser and the compiler warn about the program's text; under `-W error` (every
    warning an exception) they would raise here if they reached the process's warnings."""
    source = 'def f(x):\n    return x is 1 or "\\d" in str(x)\n'
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert check_program(source).passed
        assert compile_tree(parse(source), "<program>", "exec") is not None
    with pytest.raises(SyntaxError):
        parse("def f(:\n")
    assert check_program("def f(x):\n    return 'unclosed\n").status is ExecStatus.SYNTAX_ERROR
