"""Abduction answers on every backend: a literal answer is read as a value and built before the program runs; an
answer that needs the program's own names (a class instance of the program, a namedtuple, an iterator, as a gold
input may: §3.3.4, p(i_π) = p(i*) counts) passes the answer rules and runs with the program's functions and classes
only, so the gold input itself still solves its task, and a wrong one of the same kind fails."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from executor_svc.executor import Executor
from services.execution import ExecStatus

TASKS = [  # (program, gold input, a wrong input of the same kind)
    ("class Point:\n    def __init__(self, x, y):\n        self.x, self.y = x, y\n\n"
     "def f(p):\n    return p.x * 10 + p.y", "Point(1, 2)", "Point(2, 1)"),
    ("from collections import namedtuple\nPair = namedtuple('Pair', 'a b')\n\n"
     "def f(pair):\n    return pair.a - pair.b", "Pair(5, 3)", "Pair(3, 5)"),
    ("def f(numbers):\n    return sum(numbers)", "iter([1, 2, 3])", "iter([1, 2])"),
    ("def f(chars):\n    return ''.join(sorted(chars))", "(c for c in 'cab')", "(c for c in 'xy')"),
]


@pytest.fixture(scope="module")
def executor(executor_backend: str, executor_factory: Callable[..., Executor]) -> Iterator[Executor]:
    with executor_factory(executor_backend, workers=1) as running:
        yield running


@pytest.mark.parametrize(("program", "gold_input", "wrong_input"), TASKS)
def test_the_gold_input_itself_solves_its_task(executor: Executor, program: str, gold_input: str,
                                               wrong_input: str) -> None:
    validation = executor.validate_proposal(program, gold_input)
    assert validation.status is ExecStatus.OK and validation.output is not None
    right = executor.check_abduction(program, validation.output, gold_input)
    assert right.correct and right.status is ExecStatus.OK, right
    wrong = executor.check_abduction(program, validation.output, wrong_input)
    assert not wrong.correct and wrong.status is ExecStatus.WRONG_ANSWER, wrong


def test_a_lying_value_still_cannot_pass(executor: Executor) -> None:
    """`type` is no name an answer may use, and the returned value's repr, not its __eq__, is compared."""
    liar = "type('Liar', (), {'__eq__': lambda self, other: True})()"
    verdict = executor.check_abduction("def f(x):\n    return x", "5", liar)
    assert not verdict.correct and verdict.status is ExecStatus.FORBIDDEN


@pytest.mark.parametrize(("answer", "correct"), [
    ("[3, 1, 2]", True), ("[1, 2, 3]", True), ("(3, 2, 1)", True), ("[3, 1]", False), ("{3, 1, 2}", True),
    ("frozenset({1, 2, 3})", True), ("set()", False), ("[3, 1, 2], reverse=False", True),
])
def test_literal_answers(executor: Executor, answer: str, correct: bool) -> None:
    verdict = executor.check_abduction("def f(x, reverse=False):\n    return sorted(x, reverse=reverse)",
                                       "[1, 2, 3]", answer)
    assert verdict.correct is correct and verdict.status is (ExecStatus.OK if correct else ExecStatus.WRONG_ANSWER)
