"""Tree edit distance (Zhang–Shasha, 1989) between Python programs' ASTs, for the diversity metric of App. C.4. Pure.

The paper logs "the average abstract syntax tree (AST) edit distance between the proposed program and a set of K
reference programs" (App. C.4, Fig 27) without saying how. The authors' code (reference notes §4.2) uses
1 − difflib ratio of JSON AST dumps, which is a string similarity, not a tree edit distance. We compute the real
ordered-tree edit distance with unit costs (insert 1, delete 1, relabel 1 when labels differ) and also report it
normalised by |T1| + |T2| (the cost of deleting one tree and inserting the other, an upper bound), so it lies in
[0, 1] like the paper's plotted curve.

Decisions:
- Own implementation rather than `zss`/`apted` from PyPI: both are pure Python as well (no speed to gain), `zss`
  recomputes the postorder per call, and neither caches trees; ours keeps each program's postorder arrays in an LRU
  cache, since the same K references are compared against every proposal of a step. `edist` (Cython, fast) was
  rejected: GPL-3.0 in an Apache-2.0 project, and it pulls in scipy and scikit-learn.
- Node labels: the node's type name, plus its identifying payload where it has one (identifier of `Name`, `arg`,
  `Attribute`, function/class name, keyword, import alias; `repr` of a `Constant`), and the operator folded into
  `BinOp`/`UnaryOp`/`BoolOp`/`AugAssign`/`Compare` labels (so `+` → `*` costs one relabel, not a subtree change).
  The payload is kept because the reference dump keeps it (a program that differs only in a constant is another
  program); `with_payload=False` gives the purely structural distance. Load/Store/Del context nodes are dropped,
  as the reference does (they follow from the parent and would only inflate sizes).
- Limits: time is O(|T1|·|T2|·min(depth, leaves)² ) in pure Python; programs past `max_nodes` are refused
  (`TreeTooLarge`) rather than stalling a step. Traversals are iterative, so deep nesting cannot hit the recursion
  limit here (``ast.parse`` itself may still refuse absurd nesting with a SyntaxError/RecursionError).
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import TypeVar

from services.algorithm import thread_safe_ast

DEFAULT_MAX_NODES = 300
"""Largest AST (labelled nodes) we compare. Measured on 2 shared cores: 60×60 nodes ≈ 20 ms, 219×199 ≈ 1.2 s,
417×417 ≈ 7 s a pair (the cost grows faster than n²); the 7B model's seed programs have a median of 56, max 219."""

_CONTEXT_NODES = (ast.Load, ast.Store, ast.Del)
_OPERATOR_FIELDS = {ast.BinOp: "op", ast.UnaryOp: "op", ast.BoolOp: "op", ast.AugAssign: "op"}

NodeT = TypeVar("NodeT")


class TreeTooLarge(ValueError):
    """A tree has more nodes than the caller allowed; the distance was not computed."""


@dataclass(frozen=True)
class LabeledTree:
    """A plain ordered labelled tree (used for hand-checked cases and as a generic input)."""

    label: str
    children: tuple[LabeledTree, ...] = ()


@dataclass(frozen=True)
class PostorderTree:
    """The arrays Zhang–Shasha needs, 0-based in postorder: labels, leftmost-leaf index of each node, key roots."""

    labels: tuple[str, ...]
    leftmost: tuple[int, ...]
    keyroots: tuple[int, ...]

    @property
    def size(self) -> int:
        """Number of nodes."""
        return len(self.labels)


def index_tree(
    root: NodeT, label_of: Callable[[NodeT], str], children_of: Callable[[NodeT], Sequence[NodeT]]
) -> PostorderTree:
    """Number any ordered tree in postorder (iteratively) and derive leftmost leaves and key roots."""
    labels: list[str] = []
    leftmost: list[int] = []
    # Each frame: node, its children, index of next child, leftmost leaf of the first child (-1 until known).
    stack: list[tuple[NodeT, Sequence[NodeT], list[int]]] = [(root, children_of(root), [0, -1])]
    while stack:
        node, children, state = stack[-1]
        if state[0] < len(children):
            child = children[state[0]]
            state[0] += 1
            stack.append((child, children_of(child), [0, -1]))
            continue
        stack.pop()
        index = len(labels)
        labels.append(label_of(node))
        own_leftmost = state[1] if children else index
        leftmost.append(own_leftmost)
        if stack and stack[-1][2][1] == -1:
            stack[-1][2][1] = own_leftmost  # first finished child of the parent gives the parent's leftmost leaf
    # A key root is the highest node with a given leftmost leaf (the root, or any node with a left sibling).
    highest: dict[int, int] = {}
    for index, leaf in enumerate(leftmost):
        highest[leaf] = index
    return PostorderTree(tuple(labels), tuple(leftmost), tuple(sorted(highest.values())))


def index_labeled_tree(tree: LabeledTree) -> PostorderTree:
    """`index_tree` for a `LabeledTree`."""
    return index_tree(tree, lambda node: node.label, lambda node: node.children)


def _ast_label(node: ast.AST, with_payload: bool) -> str:
    """Type name, the folded operator(s), and (optionally) the identifying payload of one AST node."""
    label = type(node).__name__
    op_field = _OPERATOR_FIELDS.get(type(node))
    if op_field is not None:
        label += ":" + type(getattr(node, op_field)).__name__
    elif isinstance(node, ast.Compare):
        label += ":" + ",".join(type(op).__name__ for op in node.ops)
    if not with_payload:
        return label
    if isinstance(node, ast.Name):
        return f"{label}:{node.id}"
    if isinstance(node, ast.Constant):
        return f"{label}:{node.value!r}"
    if isinstance(node, ast.arg):
        return f"{label}:{node.arg}"
    if isinstance(node, ast.Attribute):
        return f"{label}:{node.attr}"
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return f"{label}:{node.name}"
    if isinstance(node, ast.keyword):
        return f"{label}:{node.arg}"
    if isinstance(node, ast.alias):
        return f"{label}:{node.name}:{node.asname}"
    if isinstance(node, ast.ImportFrom):
        return f"{label}:{node.module}"
    if isinstance(node, (ast.Global, ast.Nonlocal)):
        return f"{label}:{','.join(node.names)}"
    return label


def _ast_children(node: ast.AST) -> list[ast.AST]:
    """Child nodes in field order, without expression contexts and the operators folded into labels."""
    return [
        child
        for child in ast.iter_child_nodes(node)
        if not isinstance(child, (*_CONTEXT_NODES, ast.operator, ast.unaryop, ast.boolop, ast.cmpop))
    ]


def index_ast(tree: ast.AST, *, with_payload: bool = True) -> PostorderTree:
    """Postorder arrays of a parsed Python AST, labelled as the module docstring says."""
    return index_tree(tree, lambda node: _ast_label(node, with_payload), _ast_children)


@lru_cache(maxsize=4096)
def index_program(program: str, *, with_payload: bool = True) -> PostorderTree:
    """Parse `program` and index its AST (cached: references recur across proposals). Raises SyntaxError/ValueError."""
    return index_ast(thread_safe_ast.parse(program), with_payload=with_payload)


def tree_edit_distance(a: PostorderTree, b: PostorderTree, *, max_nodes: int = DEFAULT_MAX_NODES) -> int:
    """Zhang–Shasha ordered tree edit distance with unit insert/delete/relabel costs."""
    if a.size > max_nodes or b.size > max_nodes:
        raise TreeTooLarge(f"tree sizes {a.size} and {b.size}: the limit is {max_nodes} nodes")
    labels_a, labels_b = a.labels, b.labels
    left_a, left_b = a.leftmost, b.leftmost
    if labels_a == labels_b and left_a == left_b:
        return 0  # identical trees (common: a proposal that copies a reference)
    treedist = [[0] * b.size for _ in range(a.size)]
    # Per key root j of b, precomputed once: for each column y ≥ 1 of its forest table, the node jy, its label, and
    # where jy's own subtree starts in the table (0 when b[lj..jy] is a whole tree, i.e. left_b[jy] == lj).
    columns_b: list[tuple[int, list[tuple[int, int, str, int]]]] = []
    for j in b.keyroots:
        lj = left_b[j]
        cells = [(y, lj + y - 1, labels_b[lj + y - 1], left_b[lj + y - 1] - lj) for y in range(1, j - lj + 2)]
        columns_b.append((j - lj + 2, cells))
    for i in a.keyroots:
        li = left_a[i]
        for cols, cells in columns_b:
            # forest[x][y]: distance between forests a[li..li+x-1] and b[lj..lj+y-1].
            forest = [list(range(cols))]
            prev = forest[0]
            for ix in range(li, i + 1):
                row = [ix - li + 1] * cols
                forest.append(row)
                label_x, start_x = labels_a[ix], left_a[ix] - li
                start_row = forest[start_x]
                treedist_x = treedist[ix]
                left = row[0]
                for y, jy, label_y, start_y in cells:
                    above = prev[y]
                    value = (above if above < left else left) + 1  # delete a[ix] or insert b[jy]
                    if start_x == 0 and start_y == 0:
                        # Both prefixes are whole trees: a tree-to-tree distance, recorded for later key roots.
                        match = prev[y - 1] + (label_x != label_y)
                        if match < value:
                            value = match
                        treedist_x[jy] = value
                    else:
                        match = start_row[start_y] + treedist_x[jy]
                        if match < value:
                            value = match
                    row[y] = left = value
                prev = row
    return treedist[a.size - 1][b.size - 1]


def normalized_tree_edit_distance(a: PostorderTree, b: PostorderTree, *, max_nodes: int = DEFAULT_MAX_NODES) -> float:
    """Tree edit distance divided by |a| + |b| (its upper bound), in [0, 1]."""
    return tree_edit_distance(a, b, max_nodes=max_nodes) / (a.size + b.size)
