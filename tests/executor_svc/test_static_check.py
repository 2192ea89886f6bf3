"""The static check: Fig 8 modules in imports and dotted chains, dynamic imports, eval/exec/open, the entry function,
and the stricter rules for answers."""

from __future__ import annotations

from typing import Any

import pytest

from services.algorithm.static_check import check_answer_value, check_arguments, check_program
from services.algorithm.task_types import FORBIDDEN_MODULES
from services.execution import ExecStatus

PROGRAMS = [
    ("def f(x):\n    return x", None),
    ("f = lambda x: x", None),
    ("if True:\n    def f(x):\n        return 1", None),
    ("def open(x):\n    return x\ndef f(x):\n    return open(x)", None),  # its own `open`
    ("time = 3\ndef f(x):\n    return time.real", None),  # a variable named like a module
    ("import sys\ndef f(x):\n    sys.setrecursionlimit(10**6)\n    return 1", None),
    ("def f(x):\n    import re\n    return re.compile('a').pattern", None),
    ("import os\ndef f(x):\n    return os.environ['A']", "forbidden"),
    ("import os as o\ndef f(x):\n    return o.path.join('a')", "forbidden"),
    ("from os import path\ndef f(x):\n    return 1", "forbidden"),
    ("from os import environ as e\ndef f(x):\n    return 1", "forbidden"),
    ("import os.path\ndef f(x):\n    return 1", "forbidden"),
    ("from os import *\ndef f(x):\n    return 1", "forbidden"),
    ("import sys\ndef f(x):\n    sys.exit(1)", "forbidden"),
    ("from sys import exit\ndef f(x):\n    exit(1)", "forbidden"),
    ("import sys\ndef f(x):\n    return sys.modules['os']", "forbidden"),
    ("def f(x):\n    return __import__('os')", "forbidden"),
    ("def f(x):\n    return __builtins__.__import__('os')", "forbidden"),
    ("import importlib\ndef f(x):\n    return importlib.import_module('os')", "forbidden"),
    ("def f(x):\n    return eval('1')", "forbidden"),
    ("def f(x):\n    g = exec\n    return g", "forbidden"),
    ("def f(x):\n    return compile('1', '', 'eval')", "forbidden"),
    ("def f(x):\n    return open('/etc/passwd').read()", "forbidden"),
    ("def g(x):\n    return x", "no_function"),
    ("class A:\n    def f(self):\n        return 1", "no_function"),
    ("def f(x) return", "syntax_error"),
    ("def f(x):\n    return x\nreturn 2", "syntax_error"),  # a compile-time error, not a parse error
    ("def f(x):\n    return '\0'\x00", "syntax_error"),
] + [(f"import {module.split('.')[0]}\ndef f(x):\n    return {module}", "forbidden") for module in FORBIDDEN_MODULES]


@pytest.mark.parametrize(("source", "expected"), PROGRAMS)
def test_program_rules(source: str, expected: str | None) -> None:
    verdict = check_program(source)
    assert (verdict.status.value if verdict.status else None) == expected, verdict


def test_imports_are_reported_in_order() -> None:
    source = "import heapq\nfrom collections import deque\ndef f(x):\n    import re\n    return x"
    assert check_program(source).imports == ["import heapq", "from collections import deque", "import re"]


@pytest.mark.parametrize(("source", "answer", "expected"), [
    ("1, 2", False, None),
    ("'John', {'age': 20}", False, None),
    ("x=1, *[2]", False, None),
    ("[0, 3, 0, 1], lambda x: x < 2", True, None),
    ("", False, None),
    ("1)(2", False, "syntax_error"),
    ("1), print(2", False, "syntax_error"),
    ("__import__('os')", False, "forbidden"),
    ("eval('1')", False, "forbidden"),
    ("().__class__", False, None),  # a proposer's input may introspect; an answer may not
    ("().__class__", True, "forbidden"),
    ("type('A', (), {})()", True, "forbidden"),
    ("getattr(1, 'real')", True, "forbidden"),
    ("x.__class__.mro", True, "forbidden"),
])
def test_argument_rules(source: str, answer: bool, expected: str | None) -> None:
    verdict = check_arguments(source, answer=answer)
    assert (verdict.status.value if verdict.status else None) == expected, verdict


@pytest.mark.parametrize(("source", "expected"), [
    ("dict(a=1, b=2)", None),
    ('"Hello world"', None),
    ("  [1, (2, 3)]\n", None),
    ("inf", None),
    ("<class 'int'>", "syntax_error"),
    ("vars()", "forbidden"),
    ("[c for c in ().__class__.__base__.__subclasses__()]", "forbidden"),
])
def test_answer_value_rules(source: str, expected: str | None) -> None:
    verdict = check_answer_value(source)
    assert (verdict.status.value if verdict.status else None) == expected, verdict


DEEP_SUM = "def f(x):\n    return " + " + ".join(["x"] * 600)
"""A program that parses but nests too deeply to be walked (issue 37: it made the check raise RecursionError)."""


@pytest.mark.parametrize(("check", "text"), [
    (check_program, DEEP_SUM), (check_arguments, " + ".join(["1"] * 2000)), (check_answer_value, "-" * 5000 + "1"),
])
def test_text_too_deep_to_check_is_forbidden_with_a_reason(check: Any, text: str) -> None:
    verdict = check(text)
    assert verdict.status is ExecStatus.FORBIDDEN and "nested too deeply" in (verdict.error or ""), verdict


def test_the_executor_answers_a_deep_program_with_a_status() -> None:
    """No worker is asked: the verdict is the static check's, and nothing raises."""
    from executor_svc.executor import Executor

    with Executor(workers=1) as executor:
        result = executor.validate_proposal(DEEP_SUM, "1")
        assert result.status is ExecStatus.FORBIDDEN and "nested too deeply" in (result.error or "")
        induction = executor.validate_induction(DEEP_SUM, ["1", "2"])
        assert induction.status is ExecStatus.FORBIDDEN
