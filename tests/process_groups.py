"""Run a command that starts processes of its own (torchrun and its ranks) so that a timeout ends all of them:
`subprocess.run` kills only the child, and ranks waiting in a rendezvous outlive a killed launcher."""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Mapping, Sequence


def run_process_group(command: Sequence[str], *, timeout: float,
                      env: Mapping[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """`subprocess.run(command, capture_output=True, text=True)` in a new session; on timeout the whole process
    group is SIGKILLed before `subprocess.TimeoutExpired` (with the output so far) is raised."""
    process = subprocess.Popen(list(command), env=None if env is None else dict(env), stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        stdout, stderr = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        stdout, stderr = process.communicate()
        raise subprocess.TimeoutExpired(process.args, timeout, output=stdout, stderr=stderr) from None
    return subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)
