"""bench/faults.py's short form: the distributed pipeline on loopback (its own Redis with AOF and its own PostgreSQL
cluster, every service a process under a restart-on-failure supervisor) takes one round of the eight faults — an
executor worker mid-job (while the seeds are imported), the coordinator mid-step, an API, the inference server
mid-generation, Redis, PostgreSQL, the trainer mid-update and between its update and its checkpoint — and must end
exactly at its target step with every episode applied once by id, no triplet stored twice, versions only going up
and every process up."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import cast

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO_ROOT))  # bench/ is a directory of scripts, not an installed package

from bench.faults import (  # noqa: E402
    ROUND,
    STEP_SLIPS,
    WORKER_FAULT,
    Watch,
    _step_started,
    run,
    schedule,
    soak_table,
    table,
)


@pytest.mark.slow
@pytest.mark.faults
def test_one_round_of_faults_loses_and_repeats_nothing(tmp_path: Path, shared_dir: Path) -> None:
    result = run(clean=2, rounds=1, batch_size=2, work=tmp_path, seeds=shared_dir / "data" / "azr_seeds")
    print(table(result))
    if out := os.environ.get("AZR_FAULTS_JSON"):  # where to keep the figures (bench/results/faults.json)
        Path(out).write_text(json.dumps(result, indent=2) + "\n")
    assert [row["fault"] for row in result["faults"]] == [WORKER_FAULT] + [fault.name for fault in ROUND]
    assert result["problems"] == [], result["problems"]
    assert result["steps_recorded"] == list(range(1, result["target"] + 1))
    assert result["episodes"] > 0 and result["applied"] == result["episodes"]
    assert (result["episodes_lost"], result["episodes_duplicated"], result["triplets_duplicated"]) == (0, 0, 0)
    assert result["published_version"] == result["target"] == result["checkpoints"]
    assert result["all_up"]
    # every SIGKILLed service came back through the supervisor
    for service in ("coordinator", "worker", "proposer", "inference", "trainer"):
        assert result["restarts"][service] >= 1, (service, result["restarts"])
    # the trainer killed after publishing a version it had not checkpointed rewound the board to its checkpoint
    assert all(new == old - 1 for old, new in result["board_rewinds"]), result["board_rewinds"]


class StepClock:
    """Steps as a watch sees them on a loaded machine: step k is recorded at `ends[k - 1]` seconds after the start
    and its version published at the same moment."""

    def __init__(self, ends: list[float]) -> None:
        self.ends, self.started = ends, time.monotonic()

    def last_step(self) -> int:
        now = time.monotonic() - self.started
        return sum(1 for end in self.ends if end <= now)

    def version(self) -> int:
        return self.last_step()


def test_a_fault_whose_step_ends_first_moves_to_the_next_step() -> None:
    # step 1 ends at 0.4 s; step 2 ends 0.6 s later, before the fault's moment (0.5 x 1.6 s into it, at 1.2 s); the
    # fault then waits half as long (to 1.6 s) in step 3, which ends at 2 s
    clock = StepClock([0.4, 1.0, 2.0, 20.0])
    step, note = _step_started(cast(Watch, clock), 2, 0.5, 1.6)
    assert (step, clock.last_step()) == (3, 2)
    assert note == " (planned for step 2, which ended first)"


def test_the_schedule_leaves_the_last_round_room_to_slip() -> None:
    plan, target = schedule(clean=3, rounds=2)
    steps = [step for step, _ in plan]
    assert steps == [*range(4, 4 + len(ROUND)), *range(5 + len(ROUND), 5 + 2 * len(ROUND))]
    assert target == steps[-1] + 1 + STEP_SLIPS  # a clean step, then the slack
    assert schedule(clean=3, rounds=0) == ([], 3)


def test_the_soak_table_summarises_each_fault_over_its_rounds() -> None:
    def row(fault: str, lost: float, injected: str = "mid-step, 50% into step 4", dup: int = 0) -> dict[str, object]:
        return {"fault": fault, "seconds_lost": lost, "injected": injected, "episodes_lost": 0,
                "episodes_duplicated": dup, "triplets_duplicated": 0}

    result = {"faults": [row("coordinator SIGKILL mid-step", 20.0), row("Redis SIGKILL", 0.5),
                         row("coordinator SIGKILL mid-step", 30.0, "mid-step, 50% into step 13 (planned for step 12, "
                                                                   "which ended first)", dup=1),
                         row("coordinator SIGKILL mid-step", 4.0)]}
    lines = soak_table(result).splitlines()
    assert lines[2] == "| coordinator SIGKILL mid-step | 3 | 20.0 | 30.0 | 1 | 0 / 1 | 0 |"
    assert lines[3] == "| Redis SIGKILL | 1 | 0.5 | 0.5 | 0 | 0 / 0 | 0 |"
    assert len(lines) == 4


def test_a_fault_on_time_keeps_its_step() -> None:
    clock = StepClock([0.05, 5.0])
    assert _step_started(cast(Watch, clock), 2, 0.5, 0.2) == (2, "")


def test_a_fault_that_can_never_catch_its_step_fails_with_the_steps_it_tried() -> None:
    clock = StepClock([0.01 * k for k in range(1, 80)])  # every step shorter than even the halved moments
    with pytest.raises(AssertionError, match=f"steps 2..{2 + STEP_SLIPS} each ended"):
        _step_started(cast(Watch, clock), 2, 0.5, 0.4)


def descendants(root: int) -> set[int]:
    """Every live process below `root` (by parent pid, from /proc)."""
    children: dict[int, set[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(parent, set()).add(int(entry.name))
    found, frontier = set(), [root]
    while frontier:
        for child in children.get(frontier.pop(), ()):
            found.add(child)
            frontier.append(child)
    return found


def alive(pid: int) -> bool:
    try:
        return (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def cluster_postmasters() -> set[int]:
    """PostgreSQL servers of private test clusters (their data directories under an azr-pg-* folder)."""
    found = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:
                continue
            if "postgres -D" in command and "azr-pg-" in command:
                found.add(int(entry.name))
    return found


def command_line(pid: int) -> bytes:
    try:
        return (Path("/proc") / str(pid) / "cmdline").read_bytes()
    except OSError:
        return b""


def test_both_stop_signals_raise_into_the_teardown_even_where_sigint_was_ignored() -> None:
    """The bench's handler, in a process started as a background job is (SIGINT ignored): SIGTERM and SIGINT each
    become a KeyboardInterrupt that names it, so `main`'s `finally` runs. The whole stack's teardown is the next
    test's (one process for both signals: importing the bench takes seconds)."""
    code = ("import os, signal, sys; sys.path.insert(0, sys.argv[1]); from bench.faults import stop_on_signals\n"
            "stop_on_signals()\n"
            "for each in (signal.SIGTERM, signal.SIGINT):\n"
            "    try:\n        os.kill(os.getpid(), each); signal.sigtimedwait([], 2); print('not stopped')\n"
            "    except KeyboardInterrupt as stopped:\n        print(stopped)\n")
    done = subprocess.run([sys.executable, "-c", code, str(REPO_ROOT)], capture_output=True, text=True, timeout=120,
                          preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.splitlines() == ["stopped by signal SIGTERM", "stopped by signal SIGINT"]


@pytest.mark.slow
@pytest.mark.faults
def test_a_stopped_bench_takes_its_whole_stack_with_it(shared_dir: Path) -> None:
    """Started as a background job is (SIGINT ignored) and stopped with SIGINT, the bench ends through its teardown:
    its services sit in their own process groups, and a bench killed outright left all of them running (a SIGINT was
    ignored outright). SIGTERM reaches the same handler (the test above); one whole stack is enough (~65 s)."""
    before = cluster_postmasters()
    command = [sys.executable, str(REPO_ROOT / "bench" / "faults.py"), "--rounds", "0", "--clean", "50",
               "--out", os.devnull]
    bench = subprocess.Popen(command, cwd=REPO_ROOT, env={**os.environ, "AZR_SHARED_DIR": str(shared_dir)},
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                             preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    stack: set[int] = set()
    try:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and bench.poll() is None:
            stack = descendants(bench.pid)
            if any(b"coordinator" in command_line(pid) for pid in stack):
                break
            time.sleep(1)
        assert bench.poll() is None and stack, "the stack did not come up"
        time.sleep(5)  # steps under way
        stack |= descendants(bench.pid) | (cluster_postmasters() - before)
        bench.send_signal(signal.SIGINT)
        assert bench.wait(timeout=120) != 0
        time.sleep(2)
        assert not [pid for pid in stack if alive(pid)]
    finally:
        if bench.poll() is None:
            bench.kill()
        for pid in stack:  # whatever a failure left behind
            if alive(pid):
                os.kill(pid, signal.SIGKILL)
