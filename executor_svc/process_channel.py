"""A WorkerChannel over a local worker process's stdin/stdout pipes (the `process` backend's transport).

Where this service is root, every worker process starts under a uid of its own (`worker_uid`), drawn from a range no
host account uses: RLIMIT_NPROC never binds a process that is root outside, and with one shared uid a fork bomb in
one worker (or anything else of that uid) would make forks fail in the others, and a program could signal, trace or
read the /proc of its neighbours. Unsandboxed (`executor_sandbox = "none"`), closing such a worker also kills every
process left under its uid: what a job double-forked out of the worker's reach.
"""

from __future__ import annotations

import json
import os
import secrets
import select
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from executor_svc.channel import ReplyTimeout, WorkerLost, take_reply
from executor_svc.errors import SandboxUnavailable
from executor_svc.wire_types import JsonObject
from executor_svc.worker import PROTOCOL_VERSION

NOGROUP = 65534
WORKER_UID_BASE = 10_000_000  # far above host accounts and the usual subuid ranges (100000 + 65536 * n)
WORKER_UID_SPAN = 1_000_000_000
MAX_REPLY_BYTES = 256 << 20
SEND_TIMEOUT_S = 30.0
SWEEP_PROGRAM = "import os\ntry:\n    os.kill(-1, 9)\nexcept OSError:\n    pass\n"


def worker_uid() -> int | None:
    """A fresh uid for one worker when we are root (None otherwise: workers run as we do)."""
    return WORKER_UID_BASE + secrets.randbelow(WORKER_UID_SPAN) if os.geteuid() == 0 else None


class ProcessWorkerChannel:
    """One worker process spoken to over its stdin/stdout pipes (implements executor_svc.channel.WorkerChannel).

    `uid`: run it under this uid (gid 65534, no supplementary groups); `sweep_with`: an interpreter with which
    close() kills every process left under `uid` (for unsandboxed workers, whose leftovers no namespace ends)."""

    def __init__(self, argv: list[str], env: dict[str, str], scratch_dir: str | None = None, uid: int | None = None,
                 sweep_with: str | None = None) -> None:
        self._stderr = tempfile.TemporaryFile()
        self.uid = uid
        self._sweep_with = sweep_with if uid is not None else None
        ids: dict[str, Any] = {"user": uid, "group": NOGROUP, "extra_groups": []} if uid is not None else {}
        self._scratch_dir = scratch_dir
        self._buffer = bytearray()
        self._closed = False
        try:
            self._proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._stderr,
                                          env=env, cwd="/", close_fds=True, start_new_session=True, bufsize=0, **ids)
        except OSError as exc:
            self._stderr.close()
            raise SandboxUnavailable(f"cannot start worker {argv[0]}: {exc}") from exc
        assert self._proc.stdin is not None and self._proc.stdout is not None
        self._in, self._out = self._proc.stdin.fileno(), self._proc.stdout.fileno()
        os.set_blocking(self._in, False)

    @property
    def pid(self) -> int:
        return self._proc.pid

    def send(self, message: JsonObject) -> None:
        view = memoryview((json.dumps(message) + "\n").encode("ascii"))
        deadline = time.monotonic() + SEND_TIMEOUT_S
        try:
            poller = select.poll()
            poller.register(self._in, select.POLLOUT)
            while view:
                if not poller.poll(max(0.0, deadline - time.monotonic()) * 1000):
                    raise ReplyTimeout("the worker does not read its requests")
                view = view[os.write(self._in, view):]
        except (BrokenPipeError, ValueError, OSError) as exc:
            raise WorkerLost(self._why(f"cannot write to the worker: {exc}")) from exc

    def receive(self, timeout_s: float) -> JsonObject:
        deadline = time.monotonic() + timeout_s
        poller = select.poll()  # not select(): it fails on fd numbers above 1023
        poller.register(self._out, select.POLLIN)
        while b"\n" not in self._buffer:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise ReplyTimeout(f"no reply within {timeout_s:.1f}s")
            if not poller.poll(remaining * 1000):
                continue
            try:
                chunk = os.read(self._out, 1 << 16)
            except OSError as exc:
                raise WorkerLost(self._why(f"cannot read from the worker: {exc}")) from exc
            if not chunk:
                raise WorkerLost(self._why("the worker closed its output"))
            self._buffer += chunk
            if len(self._buffer) > MAX_REPLY_BYTES:
                raise WorkerLost("the worker's reply is too long")
        return take_reply(self._buffer)

    def alive(self) -> bool:
        return self._proc.poll() is None

    def close(self) -> None:
        """Ask the worker to exit; kill its process group (and, unsandboxed, its session) if it does not."""
        if self._closed:
            return
        self._closed = True
        if self.alive():
            try:
                self.send({"v": PROTOCOL_VERSION, "id": "close", "op": "exit"})
                self._proc.wait(timeout=1.0)
            except (WorkerLost, ReplyTimeout, subprocess.TimeoutExpired):
                pass
        try:
            os.killpg(self._proc.pid, signal.SIGKILL)
        except OSError:
            pass
        _kill_session(self._proc.pid)  # unsandboxed children live in the worker's session; before the reap below,
        self._proc.wait()              # so that the session id cannot have been reused yet
        if self._sweep_with is not None:
            _kill_uid(self._sweep_with, self.uid)
        for stream in (self._proc.stdin, self._proc.stdout, self._stderr):
            if stream is not None:
                stream.close()
        if self._scratch_dir:
            shutil.rmtree(self._scratch_dir, ignore_errors=True)

    def _why(self, what: str) -> str:
        """`what`, plus the worker's exit status and the tail of its stderr when it died."""
        code = self._proc.poll()
        if code is None:
            return what
        try:
            self._stderr.seek(0, os.SEEK_END)
            self._stderr.seek(max(0, self._stderr.tell() - 600))
            tail = self._stderr.read().decode("utf-8", "replace").strip()
        except (OSError, ValueError):
            tail = ""
        return f"{what} (exit status {code}{': ' + tail if tail else ''})"


def _kill_uid(python: str, uid: int | None) -> None:
    """SIGKILL every process of `uid`: kill(-1) from a process of that uid reaches exactly those (and not itself)."""
    try:
        subprocess.run([python, "-S", "-c", SWEEP_PROGRAM], user=uid, group=NOGROUP, extra_groups=[], env={},
                       cwd="/", timeout=30, check=False, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
    except (OSError, subprocess.SubprocessError):
        pass


def _kill_session(session: int) -> None:
    """SIGKILL every process whose session id is `session` (stat field 6)."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
            if int(fields[3]) == session:
                os.kill(int(entry), signal.SIGKILL)
        except (OSError, IndexError, ValueError):
            pass
