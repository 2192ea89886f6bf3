"""Hostile proposals (hostile_programs.py) are contained on every backend (bubblewrap, the rootless namespace sandbox,
docker): a non-ok status or a harmless result, and host-side checks that nothing happened: no host file read,
changed or created, no connection to loopback, no secret of the service's environment, no other process's command
line, the staged worker unchanged, no process left behind, and the same worker answers the next task right.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from hostile_programs import CORPUS, Hostile

from executor_svc.executor import Executor
from executor_svc.sandbox_launch import WORKER_SOURCE, stage_program
from services.execution import ExecStatus, ExecutionLimits

HOSTILE_LIMITS = ExecutionLimits(timeout_s=2.0, memory_mb=512, max_output_bytes=65536, max_processes=32)
CANARY_TEXT = "the host's canary\n"
SANITY_PROGRAM = (
    "import collections\n"
    "def f(x):\n"
    "    def depth(n):\n"
    "        return 0 if n == 0 else 1 + depth(n - 1)\n"
    "    return sorted(x) + [depth(100), collections.Counter(x)[1]]"
)
SANITY_OUTPUT = "[1, 2, 3, 100, 1]"


@dataclass
class Host:
    """What a hostile program must not touch."""

    executor: Executor
    directory: Path  # world-writable, so only the sandbox (not file permissions) protects it
    canary: Path
    newfile: Path
    listener: socket.socket
    secret: str
    marker: str  # in the command line of another host process
    staged: Path  # the staged worker program

    def fill(self, program: str) -> str:
        return (program.replace("{CANARY}", str(self.canary)).replace("{NEWFILE}", str(self.newfile))
                .replace("{PORT}", str(self.listener.getsockname()[1])).replace("{SERVICE_PID}", str(os.getpid()))
                .replace("{STAGED}", str(self.staged)).replace("{MARKER}", self.marker))


def process_table() -> dict[int, tuple[int, str]]:
    """pid -> (parent pid, start time) of every live process."""
    table = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if fields[0] != "Z":
                table[int(entry)] = (int(fields[1]), fields[19])
    return table


def descendants(root: int, table: dict[int, tuple[int, str]]) -> set[tuple[int, str]]:
    """(pid, start time) of every process below `root`."""
    found: set[tuple[int, str]] = set()
    frontier = {root}
    while frontier:
        children = {pid for pid, (parent, _) in table.items() if parent in frontier}
        found |= {(pid, table[pid][1]) for pid in children}
        frontier = children
    return found


@pytest.fixture(scope="module")
def host(executor_backend: str, executor_factory: Callable[..., Executor],
         isolation_required: Callable[[Executor], None]) -> Iterator[Host]:
    secret = f"azr-secret-{uuid.uuid4().hex}"
    os.environ["AZR_TEST_SECRET"] = secret  # set before the workers start: it must not reach them
    directory = Path(tempfile.mkdtemp(prefix="azr-hostile-"))
    directory.chmod(0o777)
    canary = directory / "canary.txt"
    canary.write_text(CANARY_TEXT)
    canary.chmod(0o666)
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    listener.setblocking(False)
    marker = f"azr-marker-{uuid.uuid4().hex}"
    bystander = subprocess.Popen(["/usr/bin/python3", "-S", "-c", "import time; time.sleep(3600)", marker],
                                 stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    executor: Executor | None = None
    try:  # from here on: a skip while the executor starts (no sandbox on this machine) must not leave the bystander
        executor = executor_factory(executor_backend, workers=1, limits=HOSTILE_LIMITS)
        isolation_required(executor)
        yield Host(executor, directory, canary, directory / "new-file", listener, secret, marker,
                   Path(stage_program().worker))
    finally:
        if executor is not None:
            executor.close()
        bystander.kill()
        bystander.wait()
        listener.close()
        shutil.rmtree(directory, ignore_errors=True)
        os.environ.pop("AZR_TEST_SECRET", None)


def assert_host_untouched(host: Host, texts: list[str]) -> None:
    assert host.canary.read_text() == CANARY_TEXT
    assert sorted(path.name for path in host.directory.iterdir()) == ["canary.txt"]
    with pytest.raises(BlockingIOError):
        host.listener.accept()[0].close()
    assert host.staged.read_bytes() == WORKER_SOURCE.read_bytes()
    for text in texts:
        assert host.secret not in text and host.marker not in text and CANARY_TEXT.strip() not in text, text[:300]


def sandbox_processes(executor: Executor) -> set[tuple[int, str]]:
    """(pid, start time) of every process below the executor's workers (their sandboxes' inits, workers, jobs)."""
    table = process_table()
    roots = [pid for pids in executor.worker_pids().values() for pid in pids]
    return set().union(*(descendants(pid, table) for pid in roots)) if roots else set()


@pytest.mark.parametrize("hostile", CORPUS, ids=lambda hostile: hostile.name)
def test_hostile_program_is_contained(host: Host, hostile: Hostile) -> None:
    host.executor.validate_proposal(SANITY_PROGRAM, "[3, 1, 2]")  # every worker up
    lost_before = sum(pool["lost"] for pool in host.executor.stats().values())
    processes_before = sandbox_processes(host.executor)
    result = host.executor.validate_proposal(host.fill(hostile.program), hostile.input)
    assert result.status.value in hostile.expect, result
    if hostile.output is not None and result.status is ExecStatus.OK:
        assert result.output == hostile.output, result
    assert_host_untouched(host, [result.output or "", result.error or ""])
    lost = sum(pool["lost"] for pool in host.executor.stats().values()) - lost_before
    assert lost == (2 if hostile.kills_worker else 0), host.executor.stats()
    if not hostile.kills_worker:  # nothing the job started is left (what the sweep SIGKILLed may take a moment)
        deadline = time.monotonic() + 3
        while (new := sandbox_processes(host.executor) - processes_before) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert new == set(), "processes of the job outlived it"
    after = host.executor.validate_proposal(SANITY_PROGRAM, "[3, 1, 2]")
    assert (after.status, after.output) == (ExecStatus.OK, SANITY_OUTPUT), after


def test_corpus_is_big_and_named_uniquely() -> None:
    names = [hostile.name for hostile in CORPUS]
    assert len(names) >= 40 and len(set(names)) == len(names)


def test_secret_in_the_executor_environment_is_really_set(host: Host) -> None:
    """Guards the env probes above against testing nothing."""
    assert os.environ["AZR_TEST_SECRET"] == host.secret


def test_no_process_survives_close(executor_backend: str, executor_factory: Callable[..., Executor],
                                   isolation_required: Callable[[Executor], None]) -> None:
    """Strays are swept after every task (bubblewrap: each worker's sandbox holds just its init and the worker),
    and no process of its workers outlives close()."""
    executor = executor_factory(executor_backend, workers=1, limits=HOSTILE_LIMITS)
    try:
        isolation_required(executor)
        spawners = [hostile for hostile in CORPUS if hostile.name in (
            "setsid_daemon_closes_fds", "fork_bomb_children_sleep", "threads", "kill_parent", "fork_bomb")]
        results = executor.validate_many([(hostile.program, hostile.input) for hostile in spawners])
        assert all(result.status.value in hostile.expect for hostile, result in zip(spawners, results)), results
        table = process_table()
        workers = [pid for pids in executor.worker_pids().values() for pid in pids]
        if executor.isolation in ("bwrap", "rootless"):  # the sandbox's outer process, its init and the worker
            assert workers and all(len(descendants(pid, table)) == 2 for pid in workers), table
        ours = {(pid, table[pid][1]) for pid in workers}.union(*(descendants(pid, table) for pid in workers))
    finally:
        executor.close()
    deadline = time.monotonic() + 5
    while (left := ours & set(descendants_everywhere())) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert left == set()


def descendants_everywhere() -> set[tuple[int, str]]:
    """(pid, start time) of every live process (whoever its parent is now)."""
    return {(pid, start) for pid, (_, start) in process_table().items()}
