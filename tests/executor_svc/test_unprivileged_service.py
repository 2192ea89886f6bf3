"""Issue 37's attacks as a normal user runs the executor (a newcomer's laptop: no root, often no bubblewrap), with
host-side checks. A stand-in for the `azr` process (tests/executor_svc/unprivileged_service.py: the process backend,
a copy of executor_svc, secrets in its environment) runs as an unprivileged uid and sends each attack to a worker
in the rootless sandbox (and in bubblewrap where installed). Nothing may come out: not its environment, not a host
file, not another process's command line, no connection to loopback, no change to the staged worker, no process
left behind, and kill(-1) must not end it.

The same attacks under `executor_sandbox = "none"` (what `auto` fell back to before, without bubblewrap) are run too,
as root only (kill(-1) of an unprivileged uid would end the user's own processes otherwise), to show that these
checks catch each attack where nothing confines it.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from executor_svc import sandbox_launch
from executor_svc.process_channel import NOGROUP, worker_uid

SOURCE = Path(__file__).resolve().parents[2] / "executor_svc"
HARNESS = Path(__file__).with_name("unprivileged_service.py")
CANARY_TEXT = "the host's canary"

ATTACKS = {
    "read_service_environ": ("import os\ndef f(x):\n"
                             "    return os.read(os.open('/proc/{SERVICE_PID}/environ', 0), 65536)"),
    "rewrite_staged_worker": ("import os\ndef f(x):\n    os.chmod('{STAGED}', 0o644)\n"
                              "    fd = os.open('{STAGED}', os.O_WRONLY | os.O_TRUNC)\n"
                              "    return os.write(fd, b'print(\"injected\")')"),
    "read_host_file": "import os\ndef f(x):\n    return os.read(os.open('{CANARY}', os.O_RDONLY), 100)",
    "list_cmdlines": ("import os\ndef f(x):\n    seen = []\n    for pid in os.listdir('/proc'):\n        try:\n"
                      "            fd = os.open('/proc/%s/cmdline' % pid, 0)\n"
                      "            seen.append(os.read(fd, 4096))\n            os.close(fd)\n"
                      "        except (OSError, ValueError):\n            pass\n    return b'|'.join(seen)"),
    "connect_loopback": ("import socket\ndef f(x):\n"
                         "    s = socket.create_connection(('127.0.0.1', {PORT}), timeout=2)\n"
                         "    s.sendall(b'stored a row')\n    return 'connected'"),
    "run_id": ("def _os():\n    for c in ().__class__.__base__.__subclasses__():\n"
               "        if c.__name__ == '_wrap_close':\n            return c.__init__.__globals__\n"
               "def f(x):\n    return _os()['waitstatus_to_exitcode'](_os()['system']('/usr/bin/id > /dev/null'))"),
    "double_fork_writes_later": ("import os, select\ndef f(x):\n    if os.fork() == 0:\n        os.setsid()\n"
                                 "        if os.fork() == 0:\n            os.closerange(3, 4096)\n"
                                 "            select.select([], [], [], 2)\n"
                                 "            os.close(os.open('{NEWFILE}', os.O_WRONLY | os.O_CREAT))\n"
                                 "        os._exit(0)\n    return 'forked'"),
}


@dataclass
class Outcome:
    """What the stand-in printed, and what the host saw."""

    first: dict[str, Any]
    second: dict[str, Any] | None
    returncode: int
    secret: str
    marker: str
    canary: Path
    newfile: Path
    connections: int
    uid: int


def leftover_processes(uid: int) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                status = Path(f"/proc/{entry}/status").read_text()
            except OSError:
                continue
            real = next(line.split()[1] for line in status.splitlines() if line.startswith("Uid:"))
            if int(real) == uid and "State:\tZ" not in status:
                found.append(int(entry))
    return found


@pytest.fixture(scope="module")
def stage() -> Iterator[Path]:
    """A copy of executor_svc (stdlib only) and the stand-in, readable by any uid."""
    directory = Path(tempfile.mkdtemp(prefix="azr-unprivileged-"))
    shutil.copytree(SOURCE, directory / "executor_svc", ignore=shutil.ignore_patterns("__pycache__", "image"))
    shutil.copy(HARNESS, directory / HARNESS.name)
    for path in [directory, *directory.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)
    yield directory
    shutil.rmtree(directory, ignore_errors=True)


def attack(stage: Path, mode: str) -> Outcome:
    uid = worker_uid()  # a fresh uid as root; ourselves (already unprivileged) otherwise
    secret = f"azr-secret-{secrets.token_hex(12)}"
    marker = f"azr-marker-{uuid.uuid4().hex}"
    host = Path(tempfile.mkdtemp(prefix="azr-host-"))
    host.chmod(0o777)
    canary = host / "canary.txt"
    canary.write_text(CANARY_TEXT)
    canary.chmod(0o644)
    newfile = host / "written-later"
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    listener.setblocking(False)
    bystander = subprocess.Popen(["/usr/bin/python3", "-S", "-c", "import time; time.sleep(600)", marker])
    programs = {name: program.replace("{CANARY}", str(canary)).replace("{NEWFILE}", str(newfile))
                .replace("{PORT}", str(listener.getsockname()[1])) for name, program in ATTACKS.items()}
    env = {"PYTHONPATH": str(stage), "AZR_API_TOKEN": secret, "AZR_REDIS_URL": f"redis://:{secret}@127.0.0.1/0"}
    ids: dict[str, Any] = {"user": uid, "group": NOGROUP, "extra_groups": []} if uid is not None else {}
    try:
        done = subprocess.run(["/usr/bin/python3", "-S", str(stage / HARNESS.name), mode, json.dumps(programs)],
                              capture_output=True, text=True, timeout=300, env=env, cwd="/", **ids)
        lines = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
        assert lines, (done.returncode, done.stderr[-3000:])
        time.sleep(3)  # the double-forked process would write now
        connections = 0
        while True:
            try:
                listener.accept()[0].close()
                connections += 1
            except BlockingIOError:
                break
        return Outcome(lines[0], lines[1] if len(lines) > 1 else None, done.returncode, secret, marker, canary,
                       newfile, connections, uid if uid is not None else os.getuid())
    finally:
        bystander.kill()
        bystander.wait()
        listener.close()
        shutil.rmtree(host, ignore_errors=True)


def sandboxes() -> list[str]:
    return ["rootless"] + (["bwrap"] if sandbox_launch.find_bwrap() else [])


@pytest.mark.parametrize("mode", sandboxes())
def test_a_normal_users_executor_contains_every_attack(stage: Path, mode: str) -> None:
    outcome = attack(stage, mode)
    results = outcome.first["results"]
    assert outcome.first["isolation"] == mode
    texts = json.dumps(outcome.first) + json.dumps(outcome.second)
    assert outcome.secret not in texts, "the service's environment reached a program"
    assert outcome.marker not in texts, "a program listed another process's command line"
    assert CANARY_TEXT not in texts, "a program read a host file"
    assert outcome.connections == 0, "a program reached a loopback port"
    assert outcome.first["staged_intact"], "a program rewrote the staged worker"
    assert results["run_id"]["output"] == "127", "a program ran /usr/bin/id"
    assert not outcome.newfile.exists(), "a double-forked process outlived its job"
    assert outcome.second is not None and outcome.returncode == 0, "kill(-1) ended the service"
    assert leftover_processes(outcome.uid) == [] if outcome.uid != os.getuid() else True


def test_the_same_checks_catch_every_attack_when_nothing_confines_it(stage: Path) -> None:
    """`executor_sandbox = "none"`: what `auto` did before without bubblewrap. The attacks the sandbox stops all
    succeed here (the exec filter and the sweep of double-forked processes hold even here)."""
    if os.geteuid() != 0:
        pytest.skip("only as root: the stand-in gets a uid of its own, so kill(-1) cannot reach the user's processes")
    outcome = attack(stage, "none")
    results = outcome.first["results"]
    assert outcome.secret in results["read_service_environ"].get("output", "")
    assert outcome.marker in results["list_cmdlines"].get("output", "")
    assert CANARY_TEXT in results["read_host_file"].get("output", "")
    assert outcome.connections == 1 and results["connect_loopback"]["output"] == "'connected'"
    assert not outcome.first["staged_intact"]
    assert outcome.second is None and outcome.returncode == -9  # kill(-1) ended the service
    assert results["run_id"]["output"] == "127" and not outcome.newfile.exists()
    assert leftover_processes(outcome.uid) == []
