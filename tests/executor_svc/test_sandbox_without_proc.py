"""A bubblewrapped worker without /proc: what the executor runs in a Kubernetes pod, whose masked /proc forbids a
fresh procfs (sandbox_launch.bwrap_argv(mount_proc=False)), and the rootless sandbox started the same way. The
worker still answers, its sandbox has no /proc to
look at the pod's processes through, and its sweep (kill(-1) instead of walking /proc) still leaves nothing of a job
behind, even a child that escaped the job's process group."""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from throwaway_servers import skip_or_fail

from executor_svc.process_channel import ProcessWorkerChannel, worker_uid
from executor_svc.sandbox_launch import SYSTEM_PATH, bwrap_argv, rootless_argv, stage_program
from executor_svc.worker import PROTOCOL_VERSION

LIMITS = {"timeout_s": 5, "memory_mb": 512, "max_output_bytes": 65536, "max_processes": 16}
GADGET = ("def _os():\n    for c in ().__class__.__base__.__subclasses__():\n"
          "        if c.__name__ == '_wrap_close':\n            return c.__init__.__globals__\n")


def children(pid: int) -> set[int]:
    """Every live (non-zombie) process below `pid`, read from the host's /proc."""
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if fields[0] != "Z":
                parents[int(entry)] = int(fields[1])
    found, frontier = set(), {pid}
    while frontier:
        frontier = {child for child, parent in parents.items() if parent in frontier}
        found |= frontier
    return found


def run(channel: ProcessWorkerChannel, program: str, args: str = "0") -> dict[str, Any]:
    """One `call` job's result."""
    channel.send({"v": PROTOCOL_VERSION, "id": "job", "op": "run", "stop_on_failure": False, "limits": LIMITS,
                  "jobs": [{"kind": "call", "program": program, "args": args, "args_mode": "source"}]})
    return channel.receive(30.0)["results"][0]


@pytest.fixture(params=["bwrap", "rootless"])
def channel(request: pytest.FixtureRequest) -> Iterator[ProcessWorkerChannel]:
    """A worker under bubblewrap, or in the rootless sandbox, with no /proc."""
    if request.param == "bwrap":
        bwrap = shutil.which("bwrap", path=SYSTEM_PATH)
        if bwrap is None:
            skip_or_fail("bubblewrap is not installed")
        argv = bwrap_argv(str(bwrap), "/usr/bin/python3", stage_program().worker, 0, mount_proc=False)
    else:
        argv = rootless_argv("/usr/bin/python3", "/usr/bin/python3", stage_program(), 0, mount_proc=False)
    worker = ProcessWorkerChannel(argv, env={}, uid=worker_uid())
    try:
        worker.send({"v": PROTOCOL_VERSION, "id": "ping", "op": "ping"})
        reply = worker.receive(20.0)
    except Exception as error:  # noqa: BLE001 - any failure to start means no usable sandbox here
        worker.close()
        skip_or_fail(f"{request.param} cannot run a worker here: {error}")
    assert reply["ok"] is True
    yield worker
    worker.close()


def test_the_sandbox_has_no_proc(channel: ProcessWorkerChannel) -> None:
    result = run(channel, GADGET + "def f(x):\n    return _os()['path'].exists('/proc/self')")
    assert (result["status"], result["output"]) == ("ok", "False")
    argv = bwrap_argv("/usr/bin/bwrap", "/usr/bin/python3", "/w.py", 0, mount_proc=False)
    assert "--proc" not in argv and "--disable-userns" not in argv  # the latter writes through a fresh /proc
    assert '"mount_proc": false' in rootless_argv("/usr/bin/python3", "/usr/bin/python3", stage_program(), 0,
                                                  mount_proc=False)[-1]


def test_the_sweep_kills_what_a_job_left_behind(channel: ProcessWorkerChannel) -> None:
    before = children(channel.pid)
    daemon = (GADGET + "def f(x):\n    os = _os()\n    if os['fork']() == 0:\n        os['setsid']()\n"
              "        os['closerange'](3, 4096)\n        while True:\n            os['pause']()\n    return 1")
    result = run(channel, daemon)
    assert result["status"] == "ok", result
    deadline = time.monotonic() + 10
    while children(channel.pid) != before and time.monotonic() < deadline:
        time.sleep(0.1)
    assert children(channel.pid) == before, "a job's escaped child outlived the job"
    assert run(channel, "def f(x):\n    return x + 1", "41")["output"] == "42"  # the worker itself survived
