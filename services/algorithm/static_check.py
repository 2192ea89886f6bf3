"""The static safety check (paper §3.3.3), run on the AST in the calling process; nothing is ever executed here.

What it forbids, and why (the sandbox, not this check, is the security boundary: this check keeps tasks pure and
deterministic and rejects the obvious cases early, with a named reason):
- the Fig 8 modules and dotted names (`FORBIDDEN_MODULES`): in `import` / `from ... import` statements (`import
  os.path`, `from os import environ`, `from sys import exit` all match) and in attribute chains rooted at an imported
  name (`os.environ[...]`, `o.path.join` after `import os as o`, `sys.exit()`); a dotted entry such as `os.environ`
  also matches literally when `os` came from elsewhere;
- dynamic imports, which would hide a module from the check: `__import__`, `importlib` / `imp`, `sys.modules`,
  `__builtins__`, `builtins.__import__`;
- `eval`, `exec`, `compile` (they run code this check cannot see) and `open` (a task is a pure function of its
  input: a file's content differs between hosts, and writing files has no place in a task), unless the program binds
  the name itself;
- in answers (the solver's predicted output or input, which are expressions, not programs) additionally every
  dunder name or attribute and `getattr`/`setattr`/`delattr`/`vars`/`globals`/`locals`/`type`: a value needs none
  of them, and they are the usual way to build an object whose `__eq__` lies.
A program must bind `f` at top level (`def f`, `class f`, `f = ...`, `import ... as f`); whether it is callable is
decided when it runs.

The check itself never raises on model text: text that parses but nests too deeply to be walked (`x + x + ...` some
600 deep), or that breaks the check in any other way, is `forbidden` with the reason, so no caller answers it as an
infrastructure fault (a 500, a dropped proposal).
"""

from __future__ import annotations

import ast
import functools
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal, ParamSpec

from services.algorithm import thread_safe_ast
from services.algorithm.task_types import ENTRY_FUNCTION, FORBIDDEN_MODULES
from services.execution import ExecStatus

# Parsing model text must not print its warnings (`invalid escape sequence`) into the service's log.
warnings.filterwarnings("ignore", category=SyntaxWarning, module="<(program|input|answer)>")
warnings.filterwarnings("ignore", category=DeprecationWarning, module="<(program|input|answer)>")

DYNAMIC_IMPORTS: tuple[str, ...] = ("importlib", "imp", "sys.modules", "builtins.__import__")
"""Modules and dotted names that import by name at run time; forbidden like the Fig 8 list."""

FORBIDDEN_CALLS: frozenset[str] = frozenset({"__import__", "__builtins__", "eval", "exec", "compile", "open"})
"""Builtin names a program may not use unless it binds them itself."""

ANSWER_FORBIDDEN_NAMES: frozenset[str] = FORBIDDEN_CALLS | {
    "getattr", "setattr", "delattr", "vars", "globals", "locals", "type", "breakpoint", "input", "help"}
"""Names an answer expression may not use at all."""


@dataclass(frozen=True)
class StaticVerdict:
    """Outcome of the static check: `status` is None when the text may run."""

    status: ExecStatus | None = None
    error: str | None = None
    imports: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return self.status is None


P = ParamSpec("P")


def _too_deep(what: str, exc: BaseException) -> StaticVerdict:
    return StaticVerdict(ExecStatus.FORBIDDEN, f"{what} is nested too deeply to check ({type(exc).__name__})")


def _never_raises(what: str) -> Callable[[Callable[P, StaticVerdict]], Callable[P, StaticVerdict]]:
    """Whatever model text does to the check, the answer is a verdict: `forbidden`, with the reason."""

    def decorate(check: Callable[P, StaticVerdict]) -> Callable[P, StaticVerdict]:
        @functools.wraps(check)
        def checked(*args: P.args, **kwargs: P.kwargs) -> StaticVerdict:
            try:
                return check(*args, **kwargs)
            except (RecursionError, MemoryError) as exc:
                return _too_deep(what, exc)
            except Exception as exc:  # a bug of ours or a parser corner: still the text's verdict, never a 500
                return StaticVerdict(ExecStatus.FORBIDDEN,
                                     f"the static check cannot read this {what}: {type(exc).__name__}: {exc}"[:300])

        return checked

    return decorate


def _parse(source: str, mode: Literal["exec", "eval"], what: str) -> ast.AST | StaticVerdict:
    try:
        tree = thread_safe_ast.parse(source, f"<{what}>", mode)
        thread_safe_ast.compile_tree(tree, f"<{what}>", mode)  # compile-time errors too ('return' outside def)
    except (RecursionError, MemoryError) as exc:
        return _too_deep(what, exc)
    except (SyntaxError, ValueError) as exc:
        return StaticVerdict(ExecStatus.SYNTAX_ERROR, f"{what} does not parse: {type(exc).__name__}: {exc}"[:300])
    return tree


def _matches(name: str, forbidden: tuple[str, ...]) -> str | None:
    """The forbidden entry that `name` is, or lies under (`os.path.join` lies under `os.path`)."""
    for entry in forbidden:
        if name == entry or name.startswith(entry + "."):
            return entry
    return None


def _dotted(node: ast.AST) -> str | None:
    """`a.b.c` for an attribute chain rooted at a plain name, else None."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    parts.append(node.id)
    return ".".join(reversed(parts))


class _Scanner(ast.NodeVisitor):
    """Collects imports, import aliases, bound names and the first forbidden use."""

    def __init__(self, forbidden: tuple[str, ...], answer: bool) -> None:
        self.forbidden = forbidden + DYNAMIC_IMPORTS
        self.dotted_only = tuple(entry for entry in self.forbidden if "." in entry)
        self.answer = answer
        self.aliases: dict[str, str] = {}
        self.imports: list[str] = []
        self.bound: set[str] = set()
        self.uses: list[tuple[str, int]] = []  # (name, line) of builtins checked once binding is known
        self.problem: str | None = None

    def _flag(self, message: str) -> None:
        if self.problem is None:
            self.problem = message

    def visit_Import(self, node: ast.Import) -> None:
        self.imports.append(ast.unparse(node))
        for alias in node.names:
            if hit := _matches(alias.name, self.forbidden):
                self._flag(f"imports forbidden module {hit!r} (line {node.lineno})")
            local = alias.asname or alias.name.split(".")[0]
            self.aliases[local] = alias.name if alias.asname else alias.name.split(".")[0]
            self.bound.add(local)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        self.imports.append(ast.unparse(node))
        module = node.module or ""
        if hit := _matches(module, self.forbidden):
            self._flag(f"imports forbidden module {hit!r} (line {node.lineno})")
        for alias in node.names:
            full = f"{module}.{alias.name}" if module else alias.name
            if alias.name == "*" and any(entry.startswith(module + ".") for entry in self.forbidden):
                self._flag(f"star-imports forbidden names from {module!r} (line {node.lineno})")
            if hit := _matches(full, self.forbidden):
                self._flag(f"imports forbidden name {hit!r} (line {node.lineno})")
            self.aliases[alias.asname or alias.name] = full
            self.bound.add(alias.asname or alias.name)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        if self.answer and node.attr.startswith("__"):
            self._flag(f"uses attribute {node.attr!r}")
        chain = _dotted(node)
        if chain is not None:  # inner links of the chain are visited too: a prefix of a clean chain is clean
            root, _, rest = chain.partition(".")
            if root in self.aliases:  # resolve `o.path` after `import os as o`
                if hit := _matches(f"{self.aliases[root]}.{rest}", self.forbidden):
                    self._flag(f"uses forbidden name {hit!r} (line {node.lineno})")
            elif hit := _matches(chain, self.dotted_only):
                self._flag(f"uses forbidden name {hit!r} (line {node.lineno})")
        self.generic_visit(node)

    def visit_Name(self, node: ast.Name) -> None:
        if isinstance(node.ctx, (ast.Store, ast.Del)):
            self.bound.add(node.id)
        elif self.answer and (node.id.startswith("__") or node.id in ANSWER_FORBIDDEN_NAMES):
            self._flag(f"uses {node.id!r}")
        elif node.id in FORBIDDEN_CALLS:
            self.uses.append((node.id, node.lineno))

    def _bind_definition(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | ast.Lambda) -> None:
        if not isinstance(node, ast.Lambda):
            self.bound.add(node.name)
        if not isinstance(node, ast.ClassDef):
            arguments = node.args
            for arg in arguments.posonlyargs + arguments.args + arguments.kwonlyargs:
                self.bound.add(arg.arg)
            for star in (arguments.vararg, arguments.kwarg):
                if star is not None:
                    self.bound.add(star.arg)
        self.generic_visit(node)

    visit_FunctionDef = visit_AsyncFunctionDef = visit_ClassDef = visit_Lambda = _bind_definition

    def finish(self) -> str | None:
        for name, line in self.uses:
            if name not in self.bound:
                self._flag(f"uses {name!r} (line {line})")
        return self.problem


def binds_entry_function(tree: ast.Module) -> bool:
    """Whether a module-level statement (also inside if/try/with/loops) binds `f`; the executor's rule."""
    pending: list[ast.stmt] = list(tree.body)
    while pending:
        statement = pending.pop()
        if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            if statement.name == ENTRY_FUNCTION:
                return True
            continue  # names bound inside a body are not module level
        if isinstance(statement, (ast.Import, ast.ImportFrom)):
            if any((alias.asname or alias.name) == ENTRY_FUNCTION for alias in statement.names):
                return True
            continue
        for child in ast.iter_child_nodes(statement):
            if isinstance(child, ast.stmt):
                pending.append(child)
            elif isinstance(child, ast.ExceptHandler):
                pending.extend(child.body)
            elif isinstance(child, ast.expr) and any(
                isinstance(node, ast.Name) and node.id == ENTRY_FUNCTION and isinstance(node.ctx, ast.Store)
                for node in ast.walk(child)
            ):
                return True
    return False


@_never_raises("program")
def check_program(source: str, forbidden: tuple[str, ...] = FORBIDDEN_MODULES) -> StaticVerdict:
    """Parse a program, reject forbidden uses, require a top-level `f`; report its import statements."""
    tree = _parse(source, "exec", "program")
    if isinstance(tree, StaticVerdict):
        return tree
    scanner = _Scanner(forbidden, answer=False)
    scanner.visit(tree)
    imports = list(dict.fromkeys(scanner.imports))
    if problem := scanner.finish():
        return StaticVerdict(ExecStatus.FORBIDDEN, f"program {problem}", imports)
    assert isinstance(tree, ast.Module)
    if not binds_entry_function(tree):
        return StaticVerdict(ExecStatus.NO_FUNCTION, f"the program defines no top-level {ENTRY_FUNCTION!r}", imports)
    return StaticVerdict(imports=imports)


@_never_raises("input")
def check_arguments(source: str, *, answer: bool = False,
                    forbidden: tuple[str, ...] = FORBIDDEN_MODULES) -> StaticVerdict:
    """Check argument source as it appears in `f(<source>)`; `answer=True` applies the stricter answer rules."""
    tree = _parse(f"{ENTRY_FUNCTION}({source}\n)", "eval", "input")
    if isinstance(tree, StaticVerdict):
        return tree
    assert isinstance(tree, ast.Expression)
    call = tree.body
    if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id == ENTRY_FUNCTION):
        return StaticVerdict(ExecStatus.SYNTAX_ERROR, "input is not an argument list")
    return _scan_expression(call.args + [keyword.value for keyword in call.keywords], answer, forbidden, "input")


@_never_raises("answer")
def check_answer_value(source: str, forbidden: tuple[str, ...] = FORBIDDEN_MODULES) -> StaticVerdict:
    """Check a predicted output: one expression, under the answer rules."""
    tree = _parse(source.strip(), "eval", "answer")
    if isinstance(tree, StaticVerdict):
        return tree
    assert isinstance(tree, ast.Expression)
    return _scan_expression([tree.body], True, forbidden, "answer")


def _scan_expression(nodes: list[ast.expr], answer: bool, forbidden: tuple[str, ...], what: str) -> StaticVerdict:
    scanner = _Scanner(forbidden, answer=answer)
    for node in nodes:
        scanner.visit(node)
    if problem := scanner.finish():
        return StaticVerdict(ExecStatus.FORBIDDEN, f"{what} {problem}")
    return StaticVerdict()
