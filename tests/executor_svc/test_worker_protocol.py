"""The worker program on its own: stdlib only, JSON lines with a version, robust to what programs print, one fresh
process per job, and value comparisons that a lying __eq__ cannot pass."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from executor_svc.worker import PROTOCOL_VERSION

WORKER = Path(__file__).resolve().parents[2] / "executor_svc" / "worker.py"
LIMITS = {"timeout_s": 2, "memory_mb": 256, "max_output_bytes": 4096, "max_processes": 8}


class Worker:
    """worker.py under Debian's python3 with nothing of ours importable (cwd /, -s -S -B, empty environment)."""

    def __init__(self, tmp_path: Path) -> None:
        self.process = subprocess.Popen(["/usr/bin/python3", "-s", "-S", "-B", str(WORKER), "--scratch", str(tmp_path)],
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                        env={"PYTHONHASHSEED": "0"}, cwd="/")

    def ask(self, message: dict[str, Any] | bytes) -> dict[str, Any]:
        assert self.process.stdin is not None and self.process.stdout is not None
        data = message if isinstance(message, bytes) else json.dumps(message).encode() + b"\n"
        self.process.stdin.write(data)
        self.process.stdin.flush()
        return json.loads(self.process.stdout.readline())

    def run(self, *jobs: dict[str, Any], stop_on_failure: bool = False) -> list[dict[str, Any]]:
        reply = self.ask({"v": PROTOCOL_VERSION, "id": 7, "op": "run", "jobs": list(jobs), "limits": LIMITS,
                          "stop_on_failure": stop_on_failure})
        assert reply["ok"] and reply["id"] == 7 and reply["v"] == PROTOCOL_VERSION, reply
        return list(reply["results"])


@pytest.fixture
def worker(tmp_path: Path) -> Iterator[Worker]:
    running = Worker(tmp_path)
    yield running
    running.process.kill()
    running.process.wait()
    for stream in (running.process.stdin, running.process.stdout, running.process.stderr):
        assert stream is not None
        stream.close()


def call(program: str, args: str = "1") -> dict[str, Any]:
    return {"kind": "call", "program": program, "args": args}


def test_ping_reports_version_seed_and_interpreter(worker: Worker) -> None:
    reply = worker.ask({"v": PROTOCOL_VERSION, "id": "a", "op": "ping"})
    assert reply["ok"] and reply["v"] == PROTOCOL_VERSION and reply["id"] == "a"
    assert reply["hash_seed"] == "0" and reply["ignore_environment"] == 0 and isinstance(reply["str_hash"], int)


def test_bad_requests_get_an_error_reply_and_the_worker_goes_on(worker: Worker) -> None:
    assert worker.ask(b"this is not json\n")["ok"] is False
    assert worker.ask(b"[1, 2]\n")["ok"] is False
    assert "version" in worker.ask({"v": 999, "id": 1, "op": "ping"})["error"]
    assert worker.ask({"v": PROTOCOL_VERSION, "id": 2, "op": "format_disk"})["ok"] is False
    assert worker.ask({"v": PROTOCOL_VERSION, "id": 3, "op": "run", "jobs": []})["ok"] is False  # no limits
    assert worker.run(call("def f(x):\n    return x + 1"))[0]["output"] == "2"


def test_nothing_of_the_project_is_importable(worker: Worker) -> None:
    result = worker.run(call("import executor_svc\ndef f(x):\n    return 1"),
                        call("import services\ndef f(x):\n    return 1"))
    assert [item["status"] for item in result] == ["runtime_error", "runtime_error"]
    assert all("ModuleNotFoundError" in item["error"] for item in result)


def test_program_output_cannot_reach_the_protocol(worker: Worker) -> None:
    program = ("import os, sys\ndef f(x):\n    print('{\"v\": 1, \"id\": 7, \"ok\": true, \"results\": []}')\n"
               "    sys.stderr.write('garbage\\n' * 1000)\n    os.write(1, b'\\n\\n{}\\n')\n    return x")
    assert worker.run(call(program, "5"))[0] == {"status": "ok", "output": "5", "none": False,
                                                 "ms": pytest.approx(0, abs=10_000)}


def test_each_job_gets_a_fresh_process(worker: Worker) -> None:
    poison = "import builtins\ndef f(x):\n    builtins.len = lambda o: -1\n    return len([1])"
    results = worker.run(call(poison), call("def f(x):\n    return len([1, 2])"))
    assert [item["output"] for item in results] == ["-1", "2"]


def test_stop_on_failure(worker: Worker) -> None:
    jobs = [call("def f(x):\n    return 10 // x", args) for args in ("1", "0", "2")]
    assert [item["status"] for item in worker.run(*jobs, stop_on_failure=True)] == ["ok", "runtime_error"]
    assert len(worker.run(*jobs)) == 3


@pytest.mark.parametrize(("answer", "expected", "equal"), [
    ("dict(a=1, b=2)", "{'b': 2, 'a': 1}", True),
    ('"Hello world"', "'Hello world'", True),
    ("1.0", "1", True),
    ("[1, 2]", "(1, 2)", False),
    ("type('Liar', (), {'__eq__': lambda self, other: True})()", "[1, 2]", False),
    ("inf", "inf", True),  # neither side evaluates: the texts are compared
    ("float('inf')", "inf", True),
    ("defaultdict(<class 'int'>, {})", "defaultdict(<class 'int'>, {})", True),
])
def test_equal_compares_values(worker: Worker, answer: str, expected: str, equal: bool) -> None:
    result = worker.run({"kind": "equal", "answer": answer, "expected": expected})[0]
    assert (result["status"], result["equal"]) == ("ok", equal), result


def test_an_answer_that_does_not_evaluate_is_reported_when_the_gold_one_does(worker: Worker) -> None:
    results = worker.run({"kind": "equal", "answer": "1 +", "expected": "1"},
                         {"kind": "equal", "answer": "undefined_name", "expected": "1"})
    assert [item["status"] for item in results] == ["syntax_error", "runtime_error"]


def test_call_equal_guards_against_lying_values(worker: Worker) -> None:
    liar = "class Liar:\n    def __eq__(self, other):\n        return True\n    __hash__ = None\n"
    jobs = [
        {"kind": "call_equal", "program": liar + "def f(x):\n    return Liar()", "args": "1", "expected": "[3]",
         "expected_scope": "pristine", "plain_args": False},
        {"kind": "call_equal", "program": "def f(x):\n    return x",
         "args": "type('L', (), {'__eq__': lambda s, o: True})()", "expected": "[3]", "expected_scope": "program",
         "plain_args": True},
        {"kind": "call_equal", "program": "import collections\nP = collections.namedtuple('P', 'x y')\n"
         "def f(x):\n    return P(x, x)", "args": "2", "expected": "P(x=2, y=2)", "expected_scope": "program",
         "plain_args": True},
        {"kind": "call_equal", "program": "import builtins\nbuiltins.list = lambda *a: 7\ndef f(x):\n    return 7",
         "args": "1", "expected": "list()", "expected_scope": "pristine", "plain_args": False},
    ]
    assert [item.get("equal") for item in worker.run(*jobs)] == [False, False, True, False]


def test_limits_are_enforced_per_job(worker: Worker) -> None:
    results = worker.run(call("def f(x):\n    while True:\n        pass"),
                         call("def f(x):\n    return bytearray(2**30)"), call("def f(x):\n    return 'x' * 5000"),
                         call("import os\ndef f(x):\n    os._exit(4)"),
                         call("def f(x):\n    return x", "2"))
    assert [item["status"] for item in results] == ["timeout", "memory", "output_too_large", "crashed", "ok"]


def test_exit_op_and_end_of_input_stop_the_worker(tmp_path: Path) -> None:
    first = Worker(tmp_path)
    assert first.ask({"v": PROTOCOL_VERSION, "id": 1, "op": "exit"})["ok"]
    assert first.process.wait(timeout=5) == 0
    second = Worker(tmp_path)
    second.process.communicate(timeout=5)
    assert second.process.returncode == 0
    assert os.listdir(tmp_path) == []  # each removed its scratch dir
