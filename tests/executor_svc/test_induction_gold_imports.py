"""Induction answer checks with and without the gold program's imports before the solver's program (the released
code prepends them; docs/paper-vs-code.md, `induction_gold_imports`): each case judged both ways by the real sandbox."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from executor_svc.executor import Executor, with_imports
from services.execution import ExecStatus


@pytest.fixture(scope="module")
def executor() -> Iterator[Executor]:
    with Executor(workers=1) as running:
        yield running


def test_a_program_using_an_imported_name_it_did_not_import(executor: Executor) -> None:
    # Gold program: `import math` + f(x) = math.floor(x / 3); hidden pairs 10 -> 3, 11 -> 3, 12 -> 4.
    # The solver wrote the right body but no import.
    answer = "def f(x):\n    return math.floor(x / 3)"
    inputs, outputs = ["10", "11", "12"], ["3", "3", "4"]
    as_written = executor.check_induction(answer, inputs, outputs)
    assert (as_written.status, as_written.correct) == (ExecStatus.RUNTIME_ERROR, False)
    assert "math" in (as_written.error or "")
    with_gold = executor.check_induction(answer, inputs, outputs, ["import math"])
    assert (with_gold.status, with_gold.correct) == (ExecStatus.OK, True)
    # The imports do not make a wrong program right: floor(x / 2) gives 5, 5, 6.
    wrong = executor.check_induction("def f(x):\n    return math.floor(x / 2)", inputs, outputs, ["import math"])
    assert (wrong.status, wrong.correct) == (ExecStatus.WRONG_ANSWER, False)


def test_a_hidden_input_using_an_imported_name(executor: Executor) -> None:
    # Gold program: `from collections import Counter`, f(c) = sorted(c.items()); the hidden input builds a Counter,
    # evaluated in the solver program's names.
    answer = "def f(c):\n    return sorted(c.items())"
    inputs, outputs = ["Counter('abca')"], ["[('a', 2), ('b', 1), ('c', 1)]"]
    as_written = executor.check_induction(answer, inputs, outputs)
    assert (as_written.status, as_written.correct) == (ExecStatus.RUNTIME_ERROR, False)
    with_gold = executor.check_induction(answer, inputs, outputs, ["from collections import Counter"])
    assert (with_gold.status, with_gold.correct) == (ExecStatus.OK, True)


def test_gold_imports_go_through_the_static_check_and_must_be_imports(executor: Executor) -> None:
    forbidden = executor.check_induction("def f(x):\n    return x", ["1"], ["1"], ["import random"])
    assert (forbidden.status, forbidden.correct) == (ExecStatus.FORBIDDEN, False)
    assert with_imports(["import math", "from os import path as p"], "def f(x):\n    return x") == (
        "import math\nfrom os import path as p\ndef f(x):\n    return x")
    assert with_imports([], "def f(x):\n    return x") == "def f(x):\n    return x"
    for not_an_import in ("x = 1", "import math; import os", "import", ""):
        with pytest.raises(ValueError, match="not one import statement"):
            with_imports([not_an_import], "def f(x):\n    return x")
