"""tests/process_groups.py: a timed-out command takes the processes it started with it."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from process_groups import run_process_group


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] if Path(f"/proc/{pid}").exists() else "X"
    return state != "Z"


def test_a_timeout_kills_the_grandchildren_too(tmp_path: Path) -> None:
    pid_file = tmp_path / "grandchild.pid"
    # the child starts a grandchild that would sleep for a minute, writes its pid, then waits for it
    script = (f"import subprocess, sys; p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']); "
              f"open({str(pid_file)!r}, 'w').write(str(p.pid)); p.wait()")
    with pytest.raises(subprocess.TimeoutExpired):
        run_process_group([sys.executable, "-c", script], timeout=3)
    grandchild = int(pid_file.read_text())
    deadline = time.monotonic() + 5
    while alive(grandchild) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive(grandchild)


def test_a_finished_command_gives_its_output_and_status() -> None:
    result = run_process_group([sys.executable, "-c", "import sys; print('out'); print('err', file=sys.stderr); "
                                "sys.exit(3)"], timeout=30, env={**os.environ, "X": "1"})
    assert (result.returncode, result.stdout, result.stderr) == (3, "out\n", "err\n")
