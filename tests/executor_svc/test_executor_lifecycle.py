"""Worker death, retry, recycling, concurrency, configuration and shutdown of the Executor."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from executor_svc import process_backend, sandbox_launch
from executor_svc.errors import ExecutorClosed, SandboxUnavailable
from executor_svc.executor import Executor
from executor_svc.process_backend import ProcessBackend
from executor_svc.process_channel import ProcessWorkerChannel, worker_uid
from executor_svc.sandbox_launch import worker_env
from executor_svc.unconfined_log import UNCONFINED_TAG
from services.execution import ExecStatus, ExecutionLimits
from services.settings import Settings

LIMITS = ExecutionLimits(timeout_s=3.0, memory_mb=512)
KILL_PARENT = "import os, signal\ndef f(x):\n    os.kill(os.getppid(), signal.SIGKILL)\n    return 1"
DOUBLE = ("def f(x):\n    return x * 2", "21", "42")


@pytest.fixture(scope="module")
def executor() -> Iterator[Executor]:
    with Executor(workers=1, limits=LIMITS) as running:
        yield running


def lost(executor: Executor) -> int:
    return sum(pool["lost"] for pool in executor.stats().values())


def children_of_this_process() -> set[int]:
    found = set()
    for entry in os.listdir("/proc"):
        try:
            if entry.isdigit() and (Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[1]
                                    == str(os.getpid())):
                found.add(int(entry))
        except OSError:
            pass
    return found


def test_a_program_that_kills_its_worker_twice_is_crashed(executor: Executor) -> None:
    before = lost(executor)
    result = executor.validate_proposal(KILL_PARENT, "1")
    assert result.status is ExecStatus.CRASHED and "twice" in (result.error or "")
    assert lost(executor) == before + 2
    assert executor.validate_proposal(DOUBLE[0], DOUBLE[1]).output == DOUBLE[2]


def test_an_answer_check_that_kills_its_worker_is_crashed_not_correct(executor: Executor) -> None:
    check = executor.check_induction(KILL_PARENT, ["1"], ["1"])
    assert (check.status, check.correct) == (ExecStatus.CRASHED, False)


def test_a_worker_lost_once_is_replaced_and_the_task_retried(executor: Executor) -> None:
    """An infrastructure hiccup (the worker killed from outside mid-task) costs a retry, not a verdict."""
    assert executor.validate_proposal(*DOUBLE[:2]).output == DOUBLE[2]  # (re)start the workers
    before = lost(executor)
    pids = executor.worker_pids()["gold"]
    assert len(pids) == 1
    killer = threading.Timer(0.5, lambda: os.kill(pids[0], signal.SIGKILL))
    killer.start()
    result = executor.validate_proposal("import select\ndef f(x):\n    select.select([], [], [], 1)\n    return x", "7")
    killer.join()
    assert (result.status, result.output) == (ExecStatus.OK, "7")
    assert lost(executor) == before + 1 and executor.worker_pids()["gold"] != pids


def test_workers_are_recycled_after_n_jobs() -> None:
    with Executor(workers=1, limits=LIMITS, recycle_after=2) as executor:
        for _ in range(5):
            assert executor.validate_proposal(*DOUBLE[:2]).output == DOUBLE[2]
        gold = executor.stats()["gold"]
    # 6 jobs per gold worker slot: the zero triplet the executor runs at start (readiness), then these 5
    assert gold["recycled"] == 3 and gold["started"] == 3 and gold["lost"] == 0  # the last slot restarts lazily


def test_batches_run_in_parallel_over_the_pool() -> None:
    sleeper = "import select\ndef f(x):\n    select.select([], [], [], 0.4)\n    return x"
    items = [(sleeper, str(index)) for index in range(6)]
    with Executor(workers=2, limits=LIMITS) as executor:
        started = time.monotonic()
        results = executor.validate_many(items)
        elapsed = time.monotonic() - started
    assert [result.output for result in results] == [str(index) for index in range(6)]
    assert elapsed < 0.75 * 6 * 2 * 0.4  # serial: 6 tasks x 2 runs x 0.4 s


def test_many_threads_share_one_executor(executor: Executor) -> None:
    outputs: dict[int, Any] = {}

    def work(base: int) -> None:
        for index in range(base, base + 10):
            outputs[index] = executor.validate_proposal("def f(x):\n    return x + 1", str(index)).output

    threads = [threading.Thread(target=work, args=(base,)) for base in range(0, 60, 10)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert outputs == {index: str(index + 1) for index in range(60)}


def test_from_settings_reads_the_executor_fields() -> None:
    settings = Settings(executor_backend="process", executor_workers=1, executor_timeout_s=4.0,
                        executor_memory_mb=300, executor_max_output_bytes=5000, executor_max_processes=9,
                        executor_sandbox="none", executor_python="/usr/bin/python3", executor_recycle_after=7)
    with Executor.from_settings(settings.executor) as executor:
        assert executor.limits == ExecutionLimits(timeout_s=4.0, memory_mb=300, max_output_bytes=5000, max_processes=9)
        assert executor.isolation == "none"
        assert executor.validate_proposal(*DOUBLE[:2]).output == DOUBLE[2]


def test_from_real_settings_uses_bubblewrap_where_it_works(isolation_required: Any) -> None:
    if sandbox_launch.find_bwrap() is None:
        pytest.skip("bubblewrap is not usable here: not installed")
    with Executor.from_settings(Settings(executor_workers=1).executor) as executor:
        isolation_required(executor)
        assert executor.isolation == "bwrap"


def hide_bubblewrap(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(sandbox_launch, "SYSTEM_PATH", str(tmp_path))  # no bwrap to be found
    monkeypatch.setattr(process_backend, "_probe_results", {})


def test_without_bubblewrap_auto_confines_in_the_rootless_sandbox(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                                  caplog: pytest.LogCaptureFixture) -> None:
    """A newcomer's machine: bubblewrap missing. `auto` runs model code in the rootless namespace sandbox, never
    unconfined; `bwrap` refuses and names the command that installs it."""
    hide_bubblewrap(monkeypatch, tmp_path)
    with pytest.raises(SandboxUnavailable, match="apt-get install -y bubblewrap"):
        Executor(workers=1, sandbox="bwrap")
    with caplog.at_level("INFO", logger=process_backend.__name__):
        try:
            executor = Executor(workers=1, sandbox="auto")
        except SandboxUnavailable as exc:  # a kernel without unprivileged user namespaces: the refusal
            assert "refusing to run model-written code unconfined" in str(exc)
            pytest.skip(f"the rootless sandbox cannot run here: {exc}")
    with executor:
        assert executor.isolation == "rootless"
        listing = executor.validate_proposal("import os\ndef f(x):\n    return sorted(os.listdir('/'))", "1")
        assert listing.output == "['azr', 'bin', 'dev', 'lib', 'lib64', 'proc', 'sbin', 'tmp', 'usr']", listing
    assert "bubblewrap unusable (bwrap is not installed)" in caplog.text


REFUSE_USERNS = ("import sys\nfrom executor_svc import process_backend, sandbox_launch\n"
                 "from executor_svc.errors import SandboxUnavailable\nsandbox_launch.SYSTEM_PATH = sys.argv[1]\n"
                 "process_backend.worker_uid = lambda: None  # as a normal user (only uid 0 is mapped in here)\n"
                 "try:\n    process_backend.ProcessBackend('/usr/bin/python3', 'auto')\n"
                 "except SandboxUnavailable as exc:\n    print(exc)\n    sys.exit(3)\nsys.exit(0)\n")


def test_where_the_kernel_refuses_user_namespaces_auto_refuses_with_the_install_command(tmp_path: Path) -> None:
    """No bubblewrap and no unprivileged user namespaces (user.max_user_namespaces = 0, set inside a user namespace
    of our own so the host keeps its setting): the executor refuses to start and says how to get bubblewrap."""
    if not os.path.exists("/usr/bin/unshare"):
        pytest.skip("util-linux's unshare is not installed")
    script = ("echo 0 > /proc/sys/user/max_user_namespaces && exec \"$0\" -c \"$1\" \"$2\"")
    result = subprocess.run(["/usr/bin/unshare", "--user", "--map-root-user", "--", "/bin/sh", "-c", script,
                             sys.executable, REFUSE_USERNS, str(tmp_path)], capture_output=True, text=True,
                            timeout=120, cwd=Path(__file__).resolve().parents[2])
    if "max_user_namespaces" in result.stderr and result.returncode != 3:
        pytest.skip(f"cannot lower user.max_user_namespaces in a user namespace here: {result.stderr.strip()}")
    assert result.returncode == 3, (result.stdout, result.stderr)
    assert "refusing to run model-written code unconfined" in result.stdout
    assert "sudo apt-get install -y bubblewrap" in result.stdout and "executor_sandbox" in result.stdout


def test_unconfined_only_when_asked_and_then_every_log_line_says_so(caplog: pytest.LogCaptureFixture) -> None:
    logger = logging.getLogger("azr.test.unconfined")
    with caplog.at_level("INFO"):
        logger.info("before")
        with Executor(workers=1, sandbox="none") as executor:
            assert executor.isolation == "none" and executor.isolation_note() is not None
            logger.info("an unrelated line %s", "while open")
        logger.info("after")
    lines = {record.getMessage().split(" [")[0]: record.getMessage() for record in caplog.records}
    assert UNCONFINED_TAG not in lines["before"] and UNCONFINED_TAG not in lines["after"]
    assert lines["an unrelated line while open"].endswith(UNCONFINED_TAG)
    assert any("UNCONFINED" in record.getMessage() and "executor_sandbox = none" in record.getMessage()
               for record in caplog.records)


def test_interpreter_must_be_an_absolute_path() -> None:
    with pytest.raises(SandboxUnavailable, match="absolute"):
        Executor(workers=1, python="python3")


def test_a_worker_that_ignores_the_hash_seed_is_refused() -> None:
    """`-I` makes Python ignore PYTHONHASHSEED: the handshake must catch it."""
    backend = ProcessBackend("/usr/bin/python3", "none")

    def isolated_mode(seed: int) -> ProcessWorkerChannel:
        return ProcessWorkerChannel(["/usr/bin/python3", "-I", "-S", backend.worker_file], env=worker_env(seed),
                                    uid=worker_uid())

    try:
        with pytest.raises(SandboxUnavailable, match="PYTHONHASHSEED"):
            Executor(workers=1, channel_factory=isolated_mode)
    finally:
        backend.close()


def test_a_worker_that_cannot_be_replaced_is_a_sandbox_error() -> None:
    backend = ProcessBackend("/usr/bin/python3")
    budget = {"starts": 2}  # one gold and one verify worker, then the machinery breaks

    def flaky(seed: int) -> ProcessWorkerChannel:
        budget["starts"] -= 1
        if budget["starts"] < 0:
            raise OSError("no more processes")
        return backend(seed)

    with Executor(workers=1, limits=LIMITS, channel_factory=flaky, isolation="test") as executor:
        assert executor.isolation == "test"
        assert executor.validate_proposal(*DOUBLE[:2]).output == DOUBLE[2]
        result = executor.validate_proposal(KILL_PARENT, "1")
        assert result.status is ExecStatus.SANDBOX_ERROR and "no more processes" in (result.error or "")
    backend.close()


def test_close_is_idempotent_and_leaves_no_process() -> None:
    before = children_of_this_process()
    executor = Executor(workers=2, limits=LIMITS)
    assert children_of_this_process() - before
    executor.validate_many([DOUBLE[:2]] * 4)
    executor.close()
    executor.close()
    assert children_of_this_process() - before == set()
    with pytest.raises(ExecutorClosed):
        executor.validate_proposal(*DOUBLE[:2])
    with pytest.raises(ExecutorClosed):
        executor.validate_many([DOUBLE[:2]])


def test_the_staged_worker_program_is_reused_guarded_and_restored(monkeypatch: pytest.MonkeyPatch,
                                                                   tmp_path: Path) -> None:
    monkeypatch.setattr(sandbox_launch, "SHARED_TMP", str(tmp_path))
    first = sandbox_launch.stage_program()
    assert sandbox_launch.stage_program() == first
    assert Path(first.worker).read_bytes() == sandbox_launch.WORKER_SOURCE.read_bytes()
    assert oct(Path(first.worker).stat().st_mode & 0o777) == "0o444"
    Path(first.worker).chmod(0o644)  # a process of our uid rewrote it (outside any sandbox): it is put back
    Path(first.worker).write_text("print('injected')")
    assert Path(sandbox_launch.stage_program().worker).read_bytes() == sandbox_launch.WORKER_SOURCE.read_bytes()
    Path(first.worker).parent.chmod(0o777)  # anyone could swap the program now: refuse to use it
    with pytest.raises(SandboxUnavailable, match="not ours alone"):
        sandbox_launch.stage_program()


def test_jobs_running_counts_the_workers_running_code_now(executor: Executor) -> None:
    """What the embedded run's torch threads follow (services/compute/torch_threads.py): 1 while a program sleeps in a
    worker, 0 once it has answered."""
    sleeper = "import select\ndef f(x):\n    select.select([], [], [], 1.0)\n    return x"
    assert executor.jobs_running() == 0
    worker = threading.Thread(target=executor.validate_proposal, args=(sleeper, "1"))
    worker.start()
    seen = 0
    deadline = time.monotonic() + 5
    while worker.is_alive() and time.monotonic() < deadline:
        seen = max(seen, executor.jobs_running())
        time.sleep(0.02)
    worker.join()
    assert seen == 1 and executor.jobs_running() == 0


def test_each_worker_runs_under_a_uid_of_its_own_when_the_service_is_root() -> None:
    """Issue 37: RLIMIT_NPROC never binds root, and workers that share a uid can signal and trace each other."""
    if os.geteuid() != 0:
        pytest.skip("the service runs as a normal user here: its workers run as that user, in their sandboxes")
    with Executor(workers=2, limits=LIMITS) as executor:
        pids = [pid for group in executor.worker_pids().values() for pid in group]
        uids = [int(next(line.split()[1] for line in Path(f"/proc/{pid}/status").read_text().splitlines()
                         if line.startswith("Uid:"))) for pid in pids]
    assert len(pids) == 4 and len(set(uids)) == 4 and 0 not in uids, uids
