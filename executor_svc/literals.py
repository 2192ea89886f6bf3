"""Model text read as values without running any of it: answers, outputs and argument lists as literals.

A repr of plain data is a literal: `[1, 'a']`, `{1: (2.5, None)}`, `b'x'`, `(1+2j)`. The reader accepts what repr
prints for the plain data types a task returns, and nothing that computes:
- constants (numbers, strings, bytes, True, False, None, `...`), signed numbers, `a+bj` / `a-bj`;
- tuple, list, set and dict displays;
- the names `inf` and `nan` (how repr prints those floats) and `Ellipsis`;
- calls of the constructors repr prints, on literal arguments: `set()`, `frozenset({1})`, `bytearray(b'')`,
  `range(0, 3)`, `slice(1, 2, None)`, `deque([1])`, `deque([1], maxlen=2)`, `Counter({'a': 1})`,
  `OrderedDict([('a', 1)])`, `Decimal('1.5')`, `Fraction(1, 3)`, `float('inf')`, and `dict(...)`, `list(...)`,
  `tuple(...)` of a literal container or keywords.
Never an operator that computes (`[0] * 3`, `1 / 3`, `'a' + 'b'`), a comprehension, a lambda, an attribute, a
subscript, another name. Arguments that would make a constructor allocate by count (`bytearray(10**9)`) or
iterate a lazy range (`list(range(10**9))`) are refused; nesting deeper than MAX_DEPTH is refused.

Used by the executor to compare a solver's answer (or a program's output) with the gold output in its own process,
and to tell which abduction answers can be built before the program runs (worker.py, `args_mode` "literal").
"""

from __future__ import annotations

import ast
import collections
import decimal
import fractions
import math
from collections.abc import Callable
from typing import TypeGuard, cast

from services.algorithm import thread_safe_ast

MAX_DEPTH = 100
"""Deepest nesting of containers and calls a literal may have (a repr of real data rarely passes 10)."""

CONCRETE = (list, tuple, set, frozenset, dict, str, bytes, collections.OrderedDict, collections.Counter,
            collections.deque)
"""What a constructor may take as its iterable or mapping argument: data already built, never a lazy range."""

LiteralValue = object
"""A value a literal denotes: a constant, a container of such values, or what a CONSTRUCTORS entry builds. Kept as
`object`: whoever reads one (the verdicts comparing answers) only compares it or checks what it holds."""

Constructor = Callable[..., LiteralValue]
"""A data constructor a literal may call (CONSTRUCTORS), checking its literal arguments before it builds."""


class NotALiteral(ValueError):
    """The text is not a literal; the message says why (a syntax error, or the first node that computes)."""


def _float_text(*args: LiteralValue) -> float:
    if len(args) != 1 or not isinstance(args[0], str):
        raise NotALiteral("float() takes one string here ('inf', 'nan', '1.5')")
    return float(args[0])


def _from_concrete(build: Constructor) -> Constructor:
    def construct(*args: LiteralValue, **kwargs: LiteralValue) -> LiteralValue:
        if len(args) > 1 or any(not isinstance(arg, CONCRETE) for arg in args):
            raise NotALiteral(f"{getattr(build, '__name__', build)}() takes one literal container here")
        return build(*args, **kwargs)

    return construct


def _bytearray(*args: LiteralValue) -> bytearray:
    if len(args) > 1 or any(not isinstance(arg, bytes) for arg in args):
        raise NotALiteral("bytearray() takes one bytes literal here")
    return bytearray(*args)


def _integers(build: Constructor) -> Constructor:
    def construct(*args: LiteralValue) -> LiteralValue:
        if any(not (arg is None or (isinstance(arg, int) and not isinstance(arg, bool))) for arg in args):
            raise NotALiteral(f"{build.__name__}() takes integers here")
        return build(*args)

    return construct


def _deque(*args: LiteralValue, maxlen: int | None = None) -> LiteralValue:
    if maxlen is not None and not isinstance(maxlen, int):
        raise NotALiteral("deque(maxlen=) takes an integer")
    return _from_concrete(collections.deque)(*args, maxlen=maxlen)


def _decimal(*args: LiteralValue) -> decimal.Decimal:
    if len(args) != 1 or not isinstance(args[0], str | int) or isinstance(args[0], bool):
        raise NotALiteral("Decimal() takes one string or integer here")
    return decimal.Decimal(args[0])


def _fraction(*args: LiteralValue) -> fractions.Fraction:
    if not 1 <= len(args) <= 2 or any(not isinstance(arg, str | int) or isinstance(arg, bool) for arg in args):
        raise NotALiteral("Fraction() takes integers or a string here")
    if len(args) == 1 and isinstance(args[0], str):
        return fractions.Fraction(args[0])
    return fractions.Fraction(*cast("tuple[int, ...]", args))  # integers, or a string beside one (TypeError)


CONSTRUCTORS: dict[str, Constructor] = {
    "set": _from_concrete(set), "frozenset": _from_concrete(frozenset), "list": _from_concrete(list),
    "tuple": _from_concrete(tuple), "dict": _from_concrete(dict), "Counter": _from_concrete(collections.Counter),
    "OrderedDict": _from_concrete(collections.OrderedDict), "deque": _deque, "bytearray": _bytearray,
    "range": _integers(range), "slice": _integers(slice), "Decimal": _decimal, "Fraction": _fraction,
    "float": _float_text,
}
"""Constructor names a literal may call (the worker binds the same names for `args_mode` "literal")."""
KEYWORDS: dict[str, frozenset[str]] = {"dict": frozenset({"*"}), "Counter": frozenset({"*"}),
                                       "deque": frozenset({"maxlen"})}
"""Keyword arguments each constructor may take ("*": any name, as `dict(a=1)`)."""
NAMES: dict[str, LiteralValue] = {"inf": math.inf, "nan": math.nan, "Ellipsis": Ellipsis}


def _number(value: LiteralValue) -> TypeGuard[int | float | complex]:
    return isinstance(value, int | float | complex) and not isinstance(value, bool)


class _Reader:
    """Turns one parsed expression into its value, refusing the first node that is not literal."""

    def value(self, node: ast.AST, depth: int = 0) -> LiteralValue:
        if depth > MAX_DEPTH:
            raise NotALiteral(f"nested more than {MAX_DEPTH} deep")
        deeper = depth + 1
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, ast.Tuple):
            return tuple(self.value(item, deeper) for item in node.elts)
        if isinstance(node, ast.List):
            return [self.value(item, deeper) for item in node.elts]
        if isinstance(node, ast.Set):
            return self._hashing(lambda: {self.value(item, deeper) for item in node.elts})
        if isinstance(node, ast.Dict):
            if any(key is None for key in node.keys):
                raise NotALiteral("a ** inside a dict display is a computation")
            return self._hashing(lambda: {self.value(key, deeper): self.value(item, deeper)
                                          for key, item in zip(node.keys, node.values) if key is not None})
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
            operand = self.value(node.operand, deeper)
            if not _number(operand):
                raise NotALiteral("a sign before something that is not a number")
            return -operand if isinstance(node.op, ast.USub) else +operand
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add | ast.Sub):
            return self._complex(node, deeper)
        if isinstance(node, ast.Name):
            if node.id in NAMES:
                return NAMES[node.id]
            raise NotALiteral(f"the name {node.id!r} is no value; an answer must be a value as repr writes it")
        if isinstance(node, ast.Call):
            return self._call(node, deeper)
        raise NotALiteral(f"{type(node).__name__} computes; an answer must be a value as repr writes it")

    def _complex(self, node: ast.BinOp, depth: int) -> complex:
        """`a+bj` / `a-bj` (how repr writes a complex): a real number and an imaginary constant, nothing else."""
        left, right = self.value(node.left, depth), self.value(node.right, depth)
        if not (_number(left) and not isinstance(left, complex) and isinstance(node.right, ast.Constant)
                and isinstance(right, complex) and right.real == 0):
            raise NotALiteral("+ and - only join the parts of a complex number in a literal")
        return left + right if isinstance(node.op, ast.Add) else left - right

    def _call(self, node: ast.Call, depth: int) -> LiteralValue:
        if not isinstance(node.func, ast.Name) or node.func.id not in CONSTRUCTORS:
            raise NotALiteral("a call of something other than a data constructor")
        name = node.func.id
        allowed = KEYWORDS.get(name, frozenset())
        if any(isinstance(arg, ast.Starred) for arg in node.args):
            raise NotALiteral("* in a constructor call")
        for keyword in node.keywords:
            if keyword.arg is None or ("*" not in allowed and keyword.arg not in allowed):
                raise NotALiteral(f"{name}() with keyword {keyword.arg!r}")
        args = [self.value(arg, depth) for arg in node.args]
        kwargs = {str(keyword.arg): self.value(keyword.value, depth) for keyword in node.keywords}
        try:
            return CONSTRUCTORS[name](*args, **kwargs)
        except NotALiteral:
            raise
        except (TypeError, ValueError, ArithmeticError, decimal.InvalidOperation) as exc:
            raise NotALiteral(f"{name}() refuses its arguments: {exc}") from None

    @staticmethod
    def _hashing(build: Callable[[], LiteralValue]) -> LiteralValue:
        try:
            return build()
        except TypeError as exc:  # an unhashable key or member
            raise NotALiteral(str(exc)) from None


def parse_expression(text: str) -> ast.expr:
    """The expression `text` holds (surrounding whitespace ignored); NotALiteral when it does not parse."""
    try:
        tree = thread_safe_ast.parse(text.strip(), "<answer>", "eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        raise NotALiteral(f"does not parse: {type(exc).__name__}: {exc}"[:300]) from None
    return tree.body


def read_value(text: str) -> LiteralValue:
    """The value a literal denotes; NotALiteral (with the reason) when `text` is no literal."""
    try:
        return _Reader().value(parse_expression(text))
    except RecursionError:
        raise NotALiteral(f"nested more than {MAX_DEPTH} deep") from None


def read_arguments(text: str) -> tuple[tuple[LiteralValue, ...], dict[str, LiteralValue]]:
    """(args, kwargs) of an argument list as it appears in `f(<text>)`, every argument a literal; NotALiteral
    otherwise."""
    try:
        tree = thread_safe_ast.parse(f"f({text}\n)", "<input>", "eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        raise NotALiteral(f"does not parse: {type(exc).__name__}: {exc}"[:300]) from None
    call = tree.body
    if not isinstance(call, ast.Call) or not isinstance(call.func, ast.Name) or call.func.id != "f":
        raise NotALiteral("not an argument list")
    if any(isinstance(arg, ast.Starred) for arg in call.args) or any(kw.arg is None for kw in call.keywords):
        raise NotALiteral("* or ** in an argument list")
    reader = _Reader()
    try:
        args = tuple(reader.value(arg, 1) for arg in call.args)
        kwargs = {str(kw.arg): reader.value(kw.value, 1) for kw in call.keywords}
    except RecursionError:
        raise NotALiteral(f"nested more than {MAX_DEPTH} deep") from None
    return args, kwargs
