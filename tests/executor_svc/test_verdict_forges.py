"""Verdicts a judged program cannot touch (issue 37), on every backend: each forge that succeeded before, from inside
the sandbox, now fails. Before, the gold value was sent into the sandbox, the comparison ran there, abduction answers
were evaluated with dunders allowed, and a job could write into its worker's protocol pipe through /proc; now the
gold value stays in the executor, verdicts are made there on values read as literals, answers are literals (or
confined expressions of the program's own names), and the worker is out of its jobs' reach."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from executor_svc.executor import Executor
from services.execution import ExecStatus, ExecutionLimits

FORGED_REPLY = (  # writes a whole reply line, with the id of the request being served, into the worker's protocol
    "import json, os, sys\n"
    "def f(x):\n"
    "    frame, request, proto = sys._getframe(), None, None\n"
    "    while frame is not None:\n"
    "        if isinstance(frame.f_locals.get('request'), dict):\n"
    "            request = frame.f_locals['request']\n"
    "        if isinstance(frame.f_locals.get('proto_out'), int):\n"
    "            proto = frame.f_locals['proto_out']\n"
    "        frame = frame.f_back\n"
    "    reply = {'v': request['v'], 'id': request['id'], 'ok': True,\n"
    "             'results': [{'status': 'ok', 'output': \"'FORGED'\", 'none': False}]}\n"
    "    try:\n"
    "        fd = os.open('/proc/%d/fd/%d' % (os.getppid(), proto), os.O_WRONLY)\n"
    "        os.write(fd, (json.dumps(reply) + '\\n').encode())\n"
    "    except OSError:\n"
    "        pass\n"
    "    raise ValueError('the real result')\n"
)

PATCH_THE_COMPARISON = (  # an abduction answer that rebinds the worker's comparison to "equal" before f runs
    "[fr.f_globals.__setitem__('_compare', lambda *a: {'status': 'ok', 'equal': True}) "
    "for c in ().__class__.__base__.__subclasses__() if c.__name__ == '_wrap_close' "
    "for fr in [c.__init__.__globals__['sys']._getframe(2)]]"
)

READ_THE_GOLD = (  # an induction program that computes nothing and returns the gold value it finds in its job
    "import ast, sys\n"
    "def f(x):\n"
    "    frame = sys._getframe(1)\n"
    "    while frame is not None:\n"
    "        job = frame.f_locals.get('job')\n"
    "        if isinstance(job, dict) and 'expected' in job:\n"
    "            return ast.literal_eval(job['expected'])\n"
    "        frame = frame.f_back\n"
    "    return 'no gold value in here'\n"
)


@pytest.fixture(scope="module")
def executor(executor_backend: str, executor_factory: Callable[..., Executor]) -> Iterator[Executor]:
    with executor_factory(executor_backend, workers=1, limits=ExecutionLimits(timeout_s=5.0)) as running:
        yield running


def test_a_forged_worker_reply_is_not_taken(executor: Executor) -> None:
    """Before: `ok` with output 'FORGED' for a program whose f raises. Now the worker is not dumpable: the job
    cannot open its worker's protocol pipe, and its own failure is what comes back."""
    result = executor.validate_proposal(FORGED_REPLY, "1")
    assert result.status is ExecStatus.RUNTIME_ERROR and "the real result" in (result.error or ""), result
    assert executor.validate_proposal("def f(x):\n    return x + 1", "1").output == "2"  # the protocol is intact


def test_a_wrong_abduction_answer_that_patches_the_comparison_is_refused(executor: Executor) -> None:
    """Before: judged correct (the answer ran in the sandbox with dunders allowed and rebound `_compare`). Now an
    answer is a literal or obeys the answer rules, and the comparison is not in the sandbox anyway."""
    verdict = executor.check_abduction("def f(x):\n    return x", "5", PATCH_THE_COMPARISON)
    assert not verdict.correct and verdict.status is ExecStatus.FORBIDDEN, verdict
    assert executor.check_abduction("def f(x):\n    return x", "5", "5").correct


def test_a_restricted_answer_reaches_no_module_of_the_program(executor: Executor) -> None:
    """An answer that is not a literal runs with the program's functions and classes only: `sys`, imported by the
    program, is not among its names, so it cannot walk frames to the worker."""
    program = "import sys\nclass Box:\n    def __init__(self, v):\n        self.v = v\ndef f(b):\n    return b.v"
    assert executor.check_abduction(program, "7", "Box(7)").correct  # the program's own class: fine
    probe = executor.check_abduction(program, "7", "Box(sys._getframe(0).f_back)")
    assert not probe.correct and probe.status is ExecStatus.RUNTIME_ERROR and "NameError" in (probe.error or "")


def test_a_wrong_induction_program_that_reads_the_gold_value_is_wrong(executor: Executor) -> None:
    """Before: judged correct (the gold output travelled in the job). Now it never enters the sandbox."""
    verdict = executor.check_induction(READ_THE_GOLD, ["1", "2"], ["10", "20"])
    assert not verdict.correct and verdict.status is ExecStatus.WRONG_ANSWER, verdict
    assert "no gold value in here" in (verdict.error or "")


def test_a_lying_eq_never_decides(executor: Executor) -> None:
    """A value whose __eq__ always answers True is compared as the text it reports, never with its own __eq__."""
    liar = ("class Liar:\n    def __eq__(self, other):\n        return True\n    def __repr__(self):\n"
            "        return 'Liar()'\n    __hash__ = None\ndef f(x):\n    return Liar()")
    assert not executor.check_induction(liar, ["1"], ["[3]"]).correct
    assert not executor.check_abduction("def f(x):\n    return x", "[3]",
                                        "type('Liar', (), {'__eq__': lambda s, o: True})()").correct
