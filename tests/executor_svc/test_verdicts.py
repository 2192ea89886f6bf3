"""Answers and outputs read as values without running them (executor_svc/literals.py), and the verdicts made from
them in the executor's own process (executor_svc/verdicts.py): Python's `==` on literals, the written form where a
repr is no literal, and a refusal, with its reason, for anything that computes."""

from __future__ import annotations

import collections
import decimal
import fractions
import math

import pytest

from executor_svc.literals import MAX_DEPTH, NotALiteral, read_arguments, read_value
from executor_svc.verdicts import compare


@pytest.mark.parametrize(("text", "value"), [
    ("[1, 'a', None]", [1, "a", None]), ("{1: (2.5, True)}", {1: (2.5, True)}), ("b'x'", b"x"),
    ("(1+2j)", 1 + 2j), ("-0.5", -0.5), ("set()", set()), ("frozenset({1, 2})", frozenset({1, 2})),
    ("Counter({'a': 2})", collections.Counter({"a": 2})), ("OrderedDict([('a', 1)])", collections.OrderedDict(a=1)),
    ("deque([1, 2], maxlen=3)", collections.deque([1, 2], maxlen=3)), ("Decimal('1.5')", decimal.Decimal("1.5")),
    ("Fraction(1, 3)", fractions.Fraction(1, 3)), ("range(0, 3)", range(0, 3)), ("inf", math.inf),
    ("-inf", -math.inf), ("float('inf')", math.inf), ("dict(a=1)", {"a": 1}), ("...", Ellipsis),
    ("bytearray(b'ab')", bytearray(b"ab")), ("slice(1, None, 2)", slice(1, None, 2)),
])
def test_what_repr_prints_reads_back(text: str, value: object) -> None:
    assert read_value(text) == value


@pytest.mark.parametrize(("text", "why"), [
    ("[0] * 3", "computes"), ("1 / 3", "computes"), ("'a' + 'b'", "complex"), ("x", "'x'"),
    ("sorted([2, 1])", "constructor"), ("lambda: 1", "computes"), ("[i for i in 'ab']", "computes"),
    ("list(range(10 ** 9))", "computes"), ("bytearray(10 ** 9)", "computes"), ("list(range(9))", "container"),
    ("bytearray(9)", "bytes"), ("{[1]: 2}", "unhashable"), ("__import__('os')", "constructor"),
    ("().__class__", "computes"), ("[" * (MAX_DEPTH + 5) + "]" * (MAX_DEPTH + 5), "nested"), ("1 +", "parse"),
    ("{**{'a': 1}}", "**"), ("dict(**{'a': 1})", "keyword"),
])
def test_anything_that_computes_is_refused_with_its_reason(text: str, why: str) -> None:
    with pytest.raises(NotALiteral, match=why.replace("*", r"\*").replace("(", r"\(")):
        read_value(text)


def test_argument_lists() -> None:
    assert read_arguments("[3, 1], 'a', key=None") == (([3, 1], "a"), {"key": None})
    assert read_arguments("") == ((), {})
    for text in ("*[1]", "**{'a': 1}", "Point(1, 2)", "lambda x: x", "1)\n(2"):
        with pytest.raises(NotALiteral):
            read_arguments(text)


@pytest.mark.parametrize(("gold", "candidate", "equal"), [
    ("[1, 2]", "[1,2]", True), ("{1, 2, 3}", "{3, 2, 1}", True), ("{'b': 2, 'a': 1}", "dict(a=1, b=2)", True),
    ("1", "1.0", True), ("1", "True", True), ("'Hello world'", '"Hello world"', True), ("nan", "nan", True),
    ("[nan]", "[nan]", True), ("inf", "float('inf')", True), ("(1, 2)", "[1, 2]", False), ("1", "2", False),
    ("[0, 0, 0]", "[0] * 3", False), ("Point(x=1, y=2)", "Point(x=1,y=2)", True),
    ("Point(x=1, y=2)", "Point(x=2, y=1)", False),
    ("defaultdict(<class 'int'>, {})", "defaultdict(<class 'int'>, {})", True),
    ("defaultdict(<class 'int'>, {})", "{}", False),
])
def test_compare(gold: str, candidate: str, equal: bool) -> None:
    verdict = compare(gold, candidate)
    assert verdict.equal is equal and (verdict.reason is None) is equal


def test_a_deep_or_huge_text_is_a_verdict_not_a_crash() -> None:
    deep = "-" * 100_000 + "1"
    assert compare("1", deep).equal is False
    assert compare(deep, deep).equal is True  # the same text, compared as written
    wide = "[" + ", ".join(["1"] * 50_000) + "]"
    assert compare(wide, wide).equal is True
