"""The worker program on its own: stdlib only, JSON lines with a version, robust to what programs print, one fresh
process per job, no verdicts (no gold value ever enters it), arguments built as their mode says, no exec, and a
worker its jobs cannot reach."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from executor_svc.process_channel import worker_uid
from executor_svc.worker import PROTOCOL_VERSION

WORKER = Path(__file__).resolve().parents[2] / "executor_svc" / "worker.py"
LIMITS = {"timeout_s": 2, "memory_mb": 256, "max_output_bytes": 4096, "max_processes": 8}


class Worker:
    """worker.py under Debian's python3 with nothing of ours importable (cwd /, -s -S -B, empty environment), as the
    process backend starts it: under a uid of its own when the tests run as root."""

    def __init__(self, scratch: Path) -> None:
        uid = worker_uid()
        ids: dict[str, Any] = {"user": uid, "group": 65534, "extra_groups": []} if uid is not None else {}
        if uid is not None:
            os.chown(scratch, uid, -1)
        self.process = subprocess.Popen(["/usr/bin/python3", "-s", "-S", "-B", str(WORKER), "--scratch", str(scratch)],
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                        env={"PYTHONHASHSEED": "0"}, cwd="/", **ids)

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
def scratch() -> Iterator[Path]:
    """A scratch base the worker's uid can reach (pytest's tmp_path is private to root)."""
    path = Path(tempfile.mkdtemp(prefix="azr-protocol-test-"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def worker(scratch: Path) -> Iterator[Worker]:
    running = Worker(scratch)
    yield running
    running.process.kill()
    running.process.wait()
    for stream in (running.process.stdin, running.process.stdout, running.process.stderr):
        assert stream is not None
        stream.close()


def call(program: str, args: str = "1", args_mode: str = "source") -> dict[str, Any]:
    return {"kind": "call", "program": program, "args": args, "args_mode": args_mode}


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


def test_there_is_no_job_that_takes_a_gold_value(worker: Worker) -> None:
    """Protocol 2 has one job kind, `call`, and no field for an expected value: verdicts are the executor's."""
    old_kinds = worker.run({"kind": "equal", "answer": "1", "expected": "1"},
                           {"kind": "call_equal", "program": "def f(x):\n    return x", "args": "1", "expected": "1"},
                           call("def f(x):\n    return x", "1", args_mode="eval_everything"))
    assert [item["status"] for item in old_kinds] == ["crashed"] * 3
    assert all("equal" not in item for item in old_kinds)


def test_literal_arguments_are_built_before_the_program_runs(worker: Worker) -> None:
    """A program that rebinds the constructors or builtins an answer names cannot change the answer's value."""
    program = ("import builtins, collections\nbuiltins.set = lambda *a: 'pwned'\ncollections.Counter = None\n"
               "frozenset = None\ndef f(a, b, c):\n    return (a, b, c)")
    result = worker.run(call(program, "set(), Counter({'a': 1}), frozenset({2})", args_mode="literal"))[0]
    assert (result["status"], result["output"]) == ("ok", "(set(), Counter({'a': 1}), frozenset({2}))"), result


def test_a_literal_job_has_no_builtins_to_call(worker: Worker) -> None:
    """Defence in depth: text sent as a literal evaluates with no builtins and only the literal constructors."""
    results = worker.run(call("def f(x):\n    return x", "len('abc')", args_mode="literal"),
                         call("import os\ndef f(x):\n    return x", "os.getpid()", args_mode="literal"))
    assert [item["status"] for item in results] == ["runtime_error", "runtime_error"]
    assert all("NameError" in item["error"] for item in results)


def test_a_restricted_answer_sees_the_programs_own_names_but_no_module(worker: Worker) -> None:
    program = ("import os, sys\nclass Point:\n    def __init__(self, x, y):\n        self.x, self.y = x, y\n"
               "def f(p):\n    return p.x * 10 + p.y")
    ok = worker.run(call(program, "Point(1, 2)", args_mode="restricted"))[0]
    assert (ok["status"], ok["output"]) == ("ok", "12")
    refused = worker.run(call(program, "os.getpid()", args_mode="restricted"),
                         call(program, "sys.modules", args_mode="restricted"),
                         call(program, "getattr(Point, 'x', 1)", args_mode="restricted"),
                         call(program, "__import__('os')", args_mode="restricted"))
    assert [item["status"] for item in refused] == ["runtime_error"] * 4
    assert all("NameError" in item["error"] for item in refused), refused


def test_a_job_cannot_exec_any_program(worker: Worker, scratch: Path) -> None:
    """The seccomp filter: execve fails with EPERM, also in what the job forks, so no shell and no /usr/bin/id."""
    assert worker.ask({"v": PROTOCOL_VERSION, "id": "p", "op": "ping"})["exec_denied"] is True
    marker = scratch / "ran"
    results = worker.run(call(f"import os\ndef f(x):\n    return os.system('touch {marker}') != 0"),
                         call("import os\ndef f(x):\n    os.execv('/usr/bin/id', ['id'])"),
                         call("import os\ndef f(x):\n    pid = os.fork()\n    if pid == 0:\n"
                              f"        try:\n            os.execv('/usr/bin/touch', ['touch', {str(marker)!r}])\n"
                              "        finally:\n            os._exit(9)\n"
                              "    return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])"))
    assert [(item["status"], item.get("output")) for item in results] == [
        ("ok", "True"), ("runtime_error", None), ("ok", "9")], results
    assert "PermissionError" in results[1]["error"]
    assert not marker.exists()


def test_a_job_cannot_reach_its_workers_protocol_or_memory(worker: Worker) -> None:
    """The worker is not dumpable: its /proc/<pid>/fd, mem and environ are closed to the job (same uid)."""
    program = ("import os\ndef f(x):\n    parent, refused = os.getppid(), []\n"
               "    for path in ('fd/1', 'fd/4', 'mem', 'environ'):\n        try:\n"
               "            mode = os.O_WRONLY if 'fd' in path else os.O_RDONLY\n"
               "            os.close(os.open('/proc/%d/%s' % (parent, path), mode))\n"
               "        except PermissionError:\n            refused.append(path)\n    return refused")
    result = worker.run(call(program))[0]
    assert (result["status"], result["output"]) == ("ok", "['fd/1', 'fd/4', 'mem', 'environ']"), result


def test_a_job_that_writes_a_forged_worker_reply_changes_nothing(worker: Worker) -> None:
    """The forge of issue 37: a job writing a whole reply line into the worker's protocol pipe."""
    forge = ("import os\ndef f(x):\n    line = b'{\"v\": 2, \"id\": 7, \"ok\": true, \"results\": "
             "[{\"status\": \"ok\", \"output\": \"FORGED\"}]}\\n'\n"
             "    for fd in range(64):\n        try:\n"
             "            os.write(os.open('/proc/%d/fd/%d' % (os.getppid(), fd), os.O_WRONLY), line)\n"
             "        except OSError:\n            pass\n    return x")
    assert [item.get("output") for item in worker.run(call(forge, "5"), call("def f(x):\n    return x", "6"))] == [
        "5", "6"]


def test_what_a_job_double_forks_is_swept(worker: Worker) -> None:
    """Unsandboxed, the worker is a child subreaper: an escaped grandchild (new session, fds closed) comes back to it
    and is killed once the job is over."""
    program = ("import os, select\ndef f(x):\n    r, w = os.pipe()\n    if os.fork() == 0:\n        os.setsid()\n"
               "        pid = os.fork()\n        if pid == 0:\n            os.closerange(3, 4096)\n"
               "            select.select([], [], [], 60)\n        os.write(w, str(pid).encode())\n"
               "        os._exit(0)\n    os.close(w)\n    return int(os.read(r, 64))")
    result = worker.run(call(program))[0]
    assert result["status"] == "ok", result
    escaped = int(result["output"])
    deadline = time.monotonic() + 5
    while alive(escaped) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive(escaped), "the double-forked process outlived its job"
    assert worker.run(call("def f(x):\n    return x + 1", "1"))[0]["output"] == "2"


def alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def children(pid: int) -> set[int]:
    """Live children of `pid` (from /proc)."""
    found = set()
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid and fields[0] != "Z":
                found.add(int(entry))
    return found


def test_limits_are_enforced_per_job(worker: Worker) -> None:
    results = worker.run(call("def f(x):\n    while True:\n        pass"),
                         call("def f(x):\n    return bytearray(2**30)"), call("def f(x):\n    return 'x' * 5000"),
                         call("import os\ndef f(x):\n    os._exit(4)"),
                         call("def f(x):\n    return x", "2"))
    assert [item["status"] for item in results] == ["timeout", "memory", "output_too_large", "crashed", "ok"]


def test_exit_op_and_end_of_input_stop_the_worker(scratch: Path) -> None:
    first = Worker(scratch)
    assert first.ask({"v": PROTOCOL_VERSION, "id": 1, "op": "exit"})["ok"]
    assert first.process.wait(timeout=5) == 0
    second = Worker(scratch)
    second.process.communicate(timeout=5)
    assert second.process.returncode == 0
    assert os.listdir(scratch) == []  # each removed its scratch dir
