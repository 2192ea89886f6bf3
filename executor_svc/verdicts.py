"""Verdicts, made in the executor's own process: is a solver's answer (or the output a sandboxed run reported) the
gold value? Nothing here runs model text; the gold value never enters a sandbox.

Both sides are texts: the gold output is the repr a validation run reported; the candidate is a deduction answer as
the solver wrote it, or the repr an abduction or induction run reported. Each is read with executor_svc/literals.py:
- both literals: equal iff the values are equal under Python's `==` (1 == 1.0 == True, sets and dicts in any
  order, as the paper's `eval(gold) == eval(answer)`), or their texts are the same expression (so `nan` matches
  `nan`, which `==` never does);
- otherwise (a repr of a program's own class, `Point(x=1, y=2)`, or of a `defaultdict(<class 'int'>, ...)`): equal
  iff both texts parse to the same expression (whitespace and quoting aside), or, where they do not parse, are the
  same text. A program's `__eq__` never decides a verdict.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from executor_svc.literals import NotALiteral, parse_expression, read_value


@dataclass(frozen=True)
class Verdict:
    """Whether the candidate is the gold value; `reason` says why not (None when equal)."""

    equal: bool
    reason: str | None = None


def _same_expression(gold: str, candidate: str) -> bool:
    """The same expression once parsed (quotes and spaces aside), or the same text where one does not parse."""
    try:
        return ast.dump(parse_expression(gold)) == ast.dump(parse_expression(candidate))
    except (NotALiteral, RecursionError):
        return gold.strip() == candidate.strip()


def compare(gold: str, candidate: str) -> Verdict:
    """Is `candidate` the value `gold` denotes? (see the module docstring)"""
    try:
        gold_value = read_value(gold)
    except NotALiteral:
        if _same_expression(gold, candidate):
            return Verdict(True)
        return Verdict(False, "not the gold output (which is no literal: compared as written)")
    try:
        value = read_value(candidate)
    except NotALiteral as why:
        return Verdict(False, f"not a value as repr writes it ({why})")
    try:
        equal = bool(gold_value == value)
    except (RecursionError, TypeError, ValueError, ArithmeticError):
        equal = False
    if equal or _same_expression(gold, candidate):
        return Verdict(True)
    return Verdict(False, "not equal to the gold output")
