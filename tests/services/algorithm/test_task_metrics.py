"""Tests for services/algorithm/task_metrics.py and ast_edit_distance.py (App. C.4 metrics).

Every expected number is worked out by hand in the comments; the CRUXEval test runs every real program of the set.
"""

from __future__ import annotations

import ast
import json
import math
from functools import cache
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from services.algorithm.ast_edit_distance import (
    LabeledTree,
    TreeTooLarge,
    index_labeled_tree,
    index_program,
    normalized_tree_edit_distance,
    tree_edit_distance,
)
from services.algorithm.task_metrics import (
    METRIC_NAMES,
    TASK_METRICS_SCHEMA_VERSION,
    AnswerHistory,
    TaskMetrics,
    aggregate_task_metrics,
    answer_diversity,
    ast_edit_distance,
    canonical_answer,
    cognitive_complexity,
    halstead_metrics,
    mean_ast_edit_distance,
    task_metrics,
)
from services.algorithm.task_types import TaskType

T = LabeledTree
IDENTITY = "def f(x):\n    return x"
# Labelled AST nodes of IDENTITY (contexts dropped): Module, FunctionDef:f, arguments, arg:x, Return, Name:x = 6.
ONE_MORE_STATEMENT = "def f(x):\n    y = 1\n    return x"
# Adds Assign, Name:y, Constant:1 = 3 nodes -> 9 nodes.


# ----------------------------------------------------------------------------------------------- tree edit distance


def naive_forest_distance(f: tuple[LabeledTree, ...], g: tuple[LabeledTree, ...]) -> int:
    """The textbook recursion on forests (rightmost roots v, w), memoised: the oracle for Zhang–Shasha."""

    @cache
    def distance(a: tuple[LabeledTree, ...], b: tuple[LabeledTree, ...]) -> int:
        if not a and not b:
            return 0
        if not a:
            return distance(a, b[:-1] + b[-1].children) + 1
        if not b:
            return distance(a[:-1] + a[-1].children, b) + 1
        v, w = a[-1], b[-1]
        return min(
            distance(a[:-1] + v.children, b) + 1,  # delete v
            distance(a, b[:-1] + w.children) + 1,  # insert w
            distance(a[:-1], b[:-1]) + distance(v.children, w.children) + (v.label != w.label),  # map v to w
        )

    return distance(f, g)


small_trees = st.recursive(
    st.builds(LabeledTree, st.sampled_from("ab"), st.just(())),
    lambda children: st.builds(LabeledTree, st.sampled_from("abc"), st.lists(children, max_size=3).map(tuple)),
    max_leaves=6,
)


def test_zhang_shasha_paper_example() -> None:
    # Zhang & Shasha (1989) Fig. 1: f(d(a c(b)) e) -> f(c(d(a b)) e): delete c under d, insert c above d = 2.
    a = T("f", (T("d", (T("a"), T("c", (T("b"),)))), T("e")))
    b = T("f", (T("c", (T("d", (T("a"), T("b"))),)), T("e")))
    indexed_a, indexed_b = index_labeled_tree(a), index_labeled_tree(b)
    # Postorder a, b, c, d, e, f; leftmost leaves 0 0|1 1 0 4 0; key roots = highest node per leftmost leaf: c, e, f.
    assert indexed_a.labels == ("a", "b", "c", "d", "e", "f")
    assert indexed_a.leftmost == (0, 1, 1, 0, 4, 0)
    assert indexed_a.keyroots == (2, 4, 5)
    assert tree_edit_distance(indexed_a, indexed_b) == 2
    assert normalized_tree_edit_distance(indexed_a, indexed_b) == pytest.approx(2 / 12)


def test_single_node_cases() -> None:
    assert tree_edit_distance(index_labeled_tree(T("a")), index_labeled_tree(T("a"))) == 0
    assert tree_edit_distance(index_labeled_tree(T("a")), index_labeled_tree(T("b"))) == 1  # relabel
    # a(b c) vs a: delete b and c.
    assert tree_edit_distance(index_labeled_tree(T("a", (T("b"), T("c")))), index_labeled_tree(T("a"))) == 2


@settings(max_examples=150, deadline=None)
@given(small_trees, small_trees)
def test_zhang_shasha_matches_the_naive_recursion(a: LabeledTree, b: LabeledTree) -> None:
    expected = naive_forest_distance((a,), (b,))
    indexed_a, indexed_b = index_labeled_tree(a), index_labeled_tree(b)
    assert tree_edit_distance(indexed_a, indexed_b) == expected
    assert tree_edit_distance(indexed_b, indexed_a) == expected  # unit costs: symmetric
    assert 0.0 <= normalized_tree_edit_distance(indexed_a, indexed_b) <= 1.0


def chain(depth: int, label: str = "n") -> LabeledTree:
    """A path of `depth` nodes, built without recursion."""
    tree = T(label)
    for _ in range(depth - 1):
        tree = T(label, (tree,))
    return tree


def test_deep_trees_do_not_recurse() -> None:
    # 5000 levels would overflow a recursive traversal (default limit 1000).
    assert index_labeled_tree(chain(5000)).size == 5000
    # Chains of 50 and 40 equal labels: delete 10 nodes.
    assert tree_edit_distance(index_labeled_tree(chain(50)), index_labeled_tree(chain(40))) == 10


def test_too_large_trees_are_refused() -> None:
    with pytest.raises(TreeTooLarge, match="limit is 30"):
        tree_edit_distance(index_labeled_tree(chain(31)), index_labeled_tree(chain(2)), max_nodes=30)


def test_ast_labels_in_postorder() -> None:
    assert index_program(IDENTITY).labels == ("arg:x", "arguments", "Name:x", "Return", "FunctionDef:f", "Module")
    # Operators fold into their node's label; without payload only types (and operators) remain.
    assert index_program("x + 1", with_payload=False).labels == ("Name", "Constant", "BinOp:Add", "Expr", "Module")
    assert "Compare:Lt,LtE" in index_program("a < b <= c").labels


def test_identical_programs_are_at_distance_zero() -> None:
    assert ast_edit_distance(IDENTITY, IDENTITY) == 0.0
    assert ast_edit_distance(IDENTITY, IDENTITY, normalized=True) == 0.0
    # Formatting and comments do not reach the AST.
    assert ast_edit_distance(IDENTITY, "def f(x):   # identity\n\n    return (x)\n") == 0.0


def test_one_added_statement_costs_its_nodes() -> None:
    # Insert Assign, Name:y, Constant:1 = 3; normalised by 6 + 9 nodes.
    assert ast_edit_distance(IDENTITY, ONE_MORE_STATEMENT) == 3.0
    assert ast_edit_distance(ONE_MORE_STATEMENT, IDENTITY) == 3.0
    assert ast_edit_distance(IDENTITY, ONE_MORE_STATEMENT, normalized=True) == pytest.approx(3 / 15)


def test_operator_and_name_changes_are_relabels() -> None:
    # BinOp:Add -> BinOp:Mult is one relabel.
    assert ast_edit_distance("def f(x):\n    return x + 1", "def f(x):\n    return x * 1") == 1.0
    # Renaming x to y relabels arg:x and Name:x (2) ...
    assert ast_edit_distance(IDENTITY, "def f(y):\n    return y") == 2.0
    # ... and is invisible to the structural distance.
    assert tree_edit_distance(
        index_program(IDENTITY, with_payload=False), index_program("def f(y):\n    return y", with_payload=False)
    ) == 0


def test_mean_distance_skips_broken_references() -> None:
    # Distances 0 (itself) and 3 (one more statement); the broken reference is skipped: mean 1.5, normalised
    # (0/12 + 3/15) / 2 = 0.1, 2 compared.
    raw, normalized, compared = mean_ast_edit_distance(IDENTITY, [IDENTITY, ONE_MORE_STATEMENT, "def f(:"])
    assert (raw, compared) == (1.5, 2)
    assert normalized == pytest.approx(0.1)
    with pytest.raises(ValueError, match="none of the 1 references"):
        mean_ast_edit_distance(IDENTITY, ["def f(:"])
    with pytest.raises(ValueError, match="none of the 0 references"):
        mean_ast_edit_distance(IDENTITY, [])


# ----------------------------------------------------------------------------------------------- complexity


@pytest.mark.parametrize(
    ("program", "expected"),
    [
        # for +1 (nesting 0), if +1+1 (nesting 1), if +1+2 (nesting 2) = 6.
        ("def f(x):\n    for i in x:\n        if i:\n            if i > 1:\n                return i\n", 6),
        # if +1, elif +1, else +1 = 3 (no nesting increments for elif/else).
        ("def f(x):\n    if x:\n        return 1\n    elif x > 2:\n        return 2\n    else:\n        return 3\n", 3),
        # if +1, a sequence `and` +1, a change to `or` +1 = 3.
        ("def f(a, b, c):\n    if a and b or c:\n        return 1\n    return 0\n", 3),
        # A straight-line function is 0.
        (IDENTITY, 0),
        # The whole program is scored: g = 0, f = for +1, nested if +2 = 3.
        ("def g(x):\n    return x\n\ndef f(x):\n    for i in x:\n        if i:\n            return g(i)\n", 3),
    ],
)
def test_cognitive_complexity_of_hand_scored_programs(program: str, expected: int) -> None:
    assert cognitive_complexity(program) == expected


def test_cognitive_complexity_rejects_unparsable_code() -> None:
    with pytest.raises(ValueError):
        cognitive_complexity("def f(:")


def test_halstead_of_a_tiny_expression() -> None:
    # return a + b * a: operators Add, Mult (h1 = 2, N1 = 2); operands of Add: a, (b*a); of Mult: b, a
    # (N2 = 4; distinct a, b, the b*a node: h2 = 3). Length 6, vocabulary 5, volume 6·log2 5,
    # difficulty h1/2 · N2/h2 = 4/3, effort = difficulty · volume.
    metrics = halstead_metrics(ast.parse("def f(a, b):\n    return a + b * a"))
    assert (metrics["halstead_length"], metrics["halstead_vocabulary"]) == (6, 5)
    assert metrics["halstead_volume"] == pytest.approx(6 * math.log2(5))
    assert metrics["halstead_difficulty"] == pytest.approx(4 / 3)
    assert metrics["halstead_effort"] == pytest.approx(4 / 3 * 6 * math.log2(5))


def test_halstead_score_of_a_conditional() -> None:
    # return -x if x < 0 else x: operators USub, Lt (h1 = 2, N1 = 2); operands x (USub), 0 and x (Lt): N2 = 3,
    # h2 = 2. Length 5, vocabulary 4, volume 5·log2 4 = 10, difficulty 1 · 3/2 = 1.5, effort 15.
    # Cyclomatic complexity 1 + IfExp = 2. Score 0.5·15/10000 + 0.3·2/10 + 0.2·10/500 = 0.06475.
    metrics = halstead_metrics(ast.parse("def f(x):\n    return -x if x < 0 else x"))
    assert metrics == pytest.approx(
        {
            "halstead_volume": 10.0,
            "halstead_difficulty": 1.5,
            "halstead_effort": 15.0,
            "halstead_length": 5,
            "halstead_vocabulary": 4,
            "halstead_score": 0.06475,
        }
    )


# ----------------------------------------------------------------------------------------------- answer diversity


def test_answer_diversity_is_one_minus_the_empirical_probability() -> None:
    counts = {"1": 3, "2": 1}
    assert answer_diversity("1", counts) == pytest.approx(0.25)  # 1 - 3/4
    assert answer_diversity("2", counts) == pytest.approx(0.75)  # 1 - 1/4
    assert answer_diversity("3", counts) == 1.0  # never seen
    assert answer_diversity("1", {}) == 1.0  # no past answers


def test_canonical_answer_merges_spellings_of_one_value() -> None:
    assert canonical_answer("1,2") == canonical_answer("(1, 2)") == "(1, 2)"
    assert canonical_answer(" 'a' ") == canonical_answer('"a"')
    assert canonical_answer("not python (") == "not python ("  # kept as text, stripped


def test_answer_history_counts_per_task_type_in_a_window() -> None:
    history = AnswerHistory(window=3)
    history.observe_all(TaskType.DEDUCTION, ["1", "1", "2"])
    history.observe(TaskType.ABDUCTION, "1")
    assert history.diversity(TaskType.DEDUCTION, "1") == pytest.approx(1 / 3)  # 1 - 2/3
    assert history.diversity(TaskType.ABDUCTION, "1") == 0.0  # the only abduction answer
    assert history.diversity(TaskType.INDUCTION, "1") == 1.0  # nothing seen for induction
    history.observe(TaskType.DEDUCTION, "3")  # evicts the oldest "1": window holds 1, 2, 3
    assert history.counts(TaskType.DEDUCTION) == {"1": 1, "2": 1, "3": 1}
    history.observe_all(TaskType.DEDUCTION, ["4", "5"])  # window: 3, 4, 5 — "1" is forgotten entirely
    assert "1" not in history.counts(TaskType.DEDUCTION)
    assert history.size(TaskType.DEDUCTION) == 3
    assert history.diversity(TaskType.DEDUCTION, "( 3 )") == pytest.approx(2 / 3)  # canonical "3"
    with pytest.raises(ValueError, match="at least 1"):
        AnswerHistory(window=0)


# ----------------------------------------------------------------------------------------------- task_metrics


def test_task_metrics_of_a_hand_checked_proposal() -> None:
    history = AnswerHistory()
    history.observe_all(TaskType.DEDUCTION, ["5", "5", "7", "9"])
    program = "def f(x):\n    return -x if x < 0 else x"
    metrics = task_metrics(program, [IDENTITY], "5", history, task_type=TaskType.DEDUCTION)
    assert metrics.errors == {}
    assert metrics.schema_version == TASK_METRICS_SCHEMA_VERSION
    assert metrics.cognitive_complexity == 1  # the conditional expression
    assert metrics.complexity_score == pytest.approx(1 / 15)
    assert metrics.halstead_effort == pytest.approx(15.0)
    # Program: Module, FunctionDef:f, arguments, arg:x, Return, IfExp, Compare:Lt, Name:x, Constant:0, UnaryOp:USub,
    # Name:x, Name:x = 12 nodes. From IDENTITY's 6: keep Module, FunctionDef, arguments, arg:x, Return, map Name:x to
    # one Name:x; insert the other 6 -> distance 6, normalised 6 / 18.
    assert metrics.ast_edit_distance == 6.0
    assert metrics.ast_edit_distance_normalized == pytest.approx(6 / 18)
    assert metrics.n_references == 1
    assert metrics.answer_diversity == pytest.approx(0.5)  # 1 - 2/4
    # Scoring only reads the history.
    assert history.size(TaskType.DEDUCTION) == 4
    assert TaskMetrics.model_validate_json(metrics.model_dump_json()) == metrics


def test_task_metrics_reports_reasons_instead_of_raising() -> None:
    metrics = task_metrics("def f(:", [IDENTITY], "1", None, task_type=TaskType.ABDUCTION)
    for name in METRIC_NAMES:
        assert getattr(metrics, name) is None
        assert metrics.errors[name]
    assert "SyntaxError" in metrics.errors["halstead_volume"]
    assert "answer history" in metrics.errors["answer_diversity"]

    no_references = task_metrics(IDENTITY, [], "1", AnswerHistory(), task_type=TaskType.ABDUCTION)
    assert no_references.ast_edit_distance is None and "references" in no_references.errors["ast_edit_distance"]
    assert no_references.cognitive_complexity == 0 and no_references.answer_diversity == 1.0

    big = "def f(x):\n" + "".join(f"    x = x + {k}\n" for k in range(60)) + "    return x"  # > 300 nodes
    too_large = task_metrics(big, [IDENTITY], None, None)
    assert too_large.ast_edit_distance is None and "limit is 300" in too_large.errors["ast_edit_distance"]
    assert too_large.halstead_length is not None


@pytest.mark.parametrize(
    "program",
    [
        "",
        "\x00",
        "x = " + "-" * 1000 + "1",  # parses, but radon's recursive visitor overflows
        "x = " + "(" * 300 + "1" + ")" * 300,  # too deeply nested for the parser
        "def f(x):\n    match x:\n        case [a, *b]:\n            return a\n"
        "        case {'k': v}:\n            return v\n",
        "async def f(x):\n    async with x as y:\n        return [z async for z in y]\n",
        "def f(x: 'ñ') -> str:\n    return f'{x!r:>{10}}' + \"\\u00e9\"\n",
        "lambda: (yield)",
        "def f(x):\n\treturn x\n        ",
    ],
)
def test_task_metrics_never_raises_on_edge_cases(program: str) -> None:
    metrics = task_metrics(program, [IDENTITY, program], "0", AnswerHistory(), task_type=TaskType.INDUCTION)
    for name in METRIC_NAMES:
        value = getattr(metrics, name)
        assert (value is None) == (name in metrics.errors), name
        if value is not None:
            assert math.isfinite(value) and value >= 0


def cruxeval_rows(shared_dir: Path) -> list[dict[str, str]]:
    """Every row of the real CRUXEval file."""
    with (shared_dir / "data" / "cruxeval.jsonl").open() as handle:
        return [json.loads(line) for line in handle]


@pytest.mark.slow
def test_every_cruxeval_program_gets_all_metrics_in_range(shared_dir: Path) -> None:
    rows = cruxeval_rows(shared_dir)
    assert len(rows) == 500
    history = AnswerHistory()
    results = []
    for index, row in enumerate(rows):
        references = [rows[(index + offset) % len(rows)]["code"] for offset in (1, 2, 3)]
        metrics = task_metrics(row["code"], references, row["output"], history, task_type=TaskType.DEDUCTION)
        history.observe(TaskType.DEDUCTION, row["output"])
        assert metrics.errors == {}, (row["id"], metrics.errors)
        assert metrics.cognitive_complexity is not None and metrics.cognitive_complexity >= 0
        assert metrics.halstead_volume is not None and metrics.halstead_volume >= 0
        assert metrics.halstead_score is not None and 0 <= metrics.halstead_score <= 1
        assert metrics.ast_edit_distance is not None and metrics.ast_edit_distance >= 1  # distinct programs
        assert metrics.ast_edit_distance_normalized is not None and 0 < metrics.ast_edit_distance_normalized <= 1
        assert metrics.n_references == 3
        assert metrics.answer_diversity is not None and 0 <= metrics.answer_diversity <= 1
        results.append(metrics)
    summary = aggregate_task_metrics(results)
    assert summary["n_tasks"] == 500.0 and summary["deduction/n_tasks"] == 500.0
    assert summary["cognitive_complexity"] > 0 and summary["answer_diversity"] > 0.5
    # Some CRUXEval outputs repeat (e.g. True, [], ''): their diversity is below 1.
    assert min(item.answer_diversity for item in results if item.answer_diversity is not None) < 1.0


# ----------------------------------------------------------------------------------------------- aggregation


def test_aggregate_means_per_metric_and_task_type() -> None:
    items = [
        TaskMetrics(task_type=TaskType.DEDUCTION, cognitive_complexity=2, answer_diversity=1.0),
        TaskMetrics(task_type=TaskType.DEDUCTION, cognitive_complexity=4, answer_diversity=None),
        TaskMetrics(task_type=TaskType.ABDUCTION, cognitive_complexity=9, answer_diversity=0.5),
    ]
    summary = aggregate_task_metrics(items)
    assert summary["n_tasks"] == 3.0
    assert summary["cognitive_complexity"] == pytest.approx(5.0)  # (2 + 4 + 9) / 3
    assert summary["answer_diversity"] == pytest.approx(0.75)  # None skipped: (1 + 0.5) / 2
    assert summary["deduction/cognitive_complexity"] == pytest.approx(3.0)
    assert summary["deduction/answer_diversity"] == 1.0
    assert summary["abduction/n_tasks"] == 1.0
    assert "halstead_volume" not in summary  # no task has it
    assert aggregate_task_metrics([]) == {"n_tasks": 0.0}
