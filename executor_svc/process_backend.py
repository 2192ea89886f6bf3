"""The `process` backend: long-lived worker processes on this host, each confined, or refused.

Sandboxes (`executor_sandbox`), in the order `auto` tries them:
- `bwrap`: bubblewrap (private user/pid/net/ipc/uts/mount namespaces, uid 65534, no capabilities, read-only /usr,
  a size-capped private /tmp, no view of the host's files);
- `rootless`: the same view built by executor_svc/rootless_launcher.py with unshare(2), for machines without
  bubblewrap (what an unprivileged Linux user has);
- neither works: `auto` refuses to start, naming the one command that installs bubblewrap. Model-written code runs
  unconfined only under `none`, which the user must set in so many words; every log line of the process then says
  so (executor_svc/unconfined_log.py) and /readyz reports the executor as not isolated.

Launch (docs/design.md §3): an absolute interpreter (never the PATH shim), `-s -S -B`, a cleared environment with an
explicit PYTHONHASHSEED (never `-I`, which ignores it). Each worker's /proc is a fresh one of its own pid namespace;
where that cannot be mounted (inside a container whose /proc has masked paths, e.g. a Kubernetes pod) it gets no
/proc at all, never the outer one. Where this process is root, every worker starts under a uid of its own
(process_channel.worker_uid): RLIMIT_NPROC never binds root, and workers must not share a uid.

Workers are spawned from one dedicated thread: bubblewrap's --die-with-parent (and the rootless launcher's
PR_SET_PDEATHSIG) follows the *thread* that spawned it, so a worker started from a short-lived request thread would
die with that thread.
"""

from __future__ import annotations

import logging
import os
import tempfile
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Literal

from executor_svc.channel import ReplyTimeout, WorkerLost
from executor_svc.errors import SandboxUnavailable
from executor_svc.process_channel import ProcessWorkerChannel, worker_uid
from executor_svc.sandbox_launch import (
    SHARED_TMP,
    bwrap_argv,
    find_bwrap,
    install_command,
    rootless_argv,
    stage_program,
    worker_env,
)
from executor_svc.unconfined_log import unconfined_closed, unconfined_opened
from executor_svc.worker import PROTOCOL_VERSION

log = logging.getLogger(__name__)

SandboxMode = Literal["auto", "bwrap", "rootless", "none"]
Isolation = Literal["bwrap", "rootless", "none"]
BWRAP_MISSING = "bwrap is not installed"
LAUNCHER_PYTHON = "/usr/bin/python3"  # runs the rootless launcher (stdlib only); the worker's interpreter otherwise
PROBE_TIMEOUT_S = 20.0


def refusal(bwrap_reason: str, rootless_reason: str) -> str:
    """Why `auto` will not start, and the one command that fixes it."""
    return (f"refusing to run model-written code unconfined: bubblewrap cannot run a worker ({bwrap_reason}) and "
            f"the rootless sandbox cannot either ({rootless_reason}). Install bubblewrap: `{install_command()}`. "
            "If that is not enough, the kernel refuses unprivileged user namespaces: `sysctl user.max_user_namespaces` "
            "must be above 0 (on Ubuntu 23.10 and later the bubblewrap package allows them for bwrap). "
            "To run it unconfined anyway, set executor_sandbox = \"none\" (AZR_EXECUTOR_SANDBOX=none); "
            "docs/isolation.md")


class ProcessBackend:
    """Channel factory of the process backend: `backend(hash_seed)` starts one worker. Call close() when done."""

    def __init__(self, python: str, sandbox: SandboxMode = "auto") -> None:
        if not os.path.isabs(python) or not os.access(python, os.X_OK):
            raise SandboxUnavailable(f"executor_python must be an absolute path to an interpreter, got {python!r}")
        self.python = python
        self.launcher_python = LAUNCHER_PYTHON if os.access(LAUNCHER_PYTHON, os.X_OK) else python
        self.worker_file = stage_program().worker
        self._spawner = ThreadPoolExecutor(max_workers=1, thread_name_prefix="azr-spawn")
        self._lock = threading.Lock()
        self._closed = False
        self.mount_proc = True  # whether sandboxed workers get a fresh /proc (settled by _resolve)
        self.isolation: Isolation = "none"
        try:
            self.isolation = self._resolve(sandbox)
        except BaseException:
            self._spawner.shutdown(wait=True)
            self._closed = True
            raise
        if self.isolation == "none":
            unconfined_opened()

    def __call__(self, hash_seed: int) -> ProcessWorkerChannel:
        with self._lock:
            if self._closed:
                raise SandboxUnavailable("the process backend is closed")
            return self._spawner.submit(self._start, hash_seed, self.isolation, self.mount_proc).result()

    def _start(self, hash_seed: int, isolation: Isolation, mount_proc: bool = True) -> ProcessWorkerChannel:
        staged = stage_program()  # again for every worker: replaces a staged file that was changed
        uid = worker_uid()
        if isolation == "bwrap":
            argv = bwrap_argv(find_bwrap() or "bwrap", self.python, staged.worker, hash_seed, mount_proc)
            return ProcessWorkerChannel(argv, env={}, uid=uid)
        if isolation == "rootless":
            argv = rootless_argv(self.launcher_python, self.python, staged, hash_seed, mount_proc)
            return ProcessWorkerChannel(argv, env={}, uid=uid)
        scratch = tempfile.mkdtemp(prefix="azr-scratch-", dir=SHARED_TMP)
        if uid is not None:
            os.chown(scratch, uid, -1)
        argv = [self.python, "-s", "-S", "-B", staged.worker, "--scratch", scratch]
        return ProcessWorkerChannel(argv, env=worker_env(hash_seed), scratch_dir=scratch, uid=uid,
                                    sweep_with=self.launcher_python)

    def _resolve(self, sandbox: SandboxMode) -> Isolation:
        """The isolation the workers get: the first sandbox that runs a worker here, or a refusal."""
        if sandbox == "none":
            log.warning("executor_sandbox = none: model-written programs run UNCONFINED (rlimits only: they can read "
                        "this machine's files, reach its network and services, and see its processes)")
            return "none"
        reasons: dict[str, str] = {}
        for candidate in ("bwrap", "rootless"):
            if sandbox not in ("auto", candidate):
                continue
            reason, self.mount_proc = self._probe(candidate)
            if reason is None:
                if not self.mount_proc:
                    log.info("%s cannot mount a fresh /proc here (a container's masked /proc); sandbox workers run "
                             "without /proc", candidate)
                if candidate == "rootless" and sandbox == "auto":
                    log.info("bubblewrap unusable (%s): workers run in the rootless namespace sandbox",
                             reasons["bwrap"])
                return candidate
            reasons[candidate] = reason
        if sandbox == "bwrap":
            raise SandboxUnavailable(f"executor_sandbox='bwrap' but bubblewrap cannot run a worker: {reasons['bwrap']}."
                                     f" Install it: `{install_command()}`")
        if sandbox == "rootless":
            raise SandboxUnavailable("executor_sandbox='rootless' but the rootless sandbox cannot run a worker: "
                                     f"{reasons['rootless']}. Install bubblewrap: `{install_command()}`")
        raise SandboxUnavailable(refusal(reasons["bwrap"], reasons["rootless"]))

    def _probe(self, isolation: Isolation) -> tuple[str | None, bool]:
        """(why a sandboxed worker cannot start and answer a ping, or None when it can; whether it gets a fresh
        /proc), cached per process. A worker with /proc is tried first, then one without."""
        key = (isolation, self.python, os.geteuid())
        if key not in _probe_results:
            _probe_results[key] = self._run_probes(isolation)
        return _probe_results[key]

    def _run_probes(self, isolation: Isolation) -> tuple[str | None, bool]:
        if isolation == "bwrap" and find_bwrap() is None:
            return BWRAP_MISSING, True
        with_proc = self._run_probe(isolation, mount_proc=True)
        if with_proc is None:
            return None, True
        without_proc = self._run_probe(isolation, mount_proc=False)
        if without_proc is None:
            return None, False
        return f"{with_proc} (and without /proc: {without_proc})", True

    def _run_probe(self, isolation: Isolation, mount_proc: bool) -> str | None:
        try:
            channel = self._spawner.submit(self._start, 0, isolation, mount_proc).result()
        except SandboxUnavailable as exc:
            return str(exc)
        try:
            channel.send({"v": PROTOCOL_VERSION, "id": "probe", "op": "ping"})
            reply = channel.receive(PROBE_TIMEOUT_S)
            return None if reply.get("ok") else f"bad ping reply {reply!r}"
        except (WorkerLost, ReplyTimeout) as exc:
            return str(exc)
        finally:
            channel.close()

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
        self._spawner.shutdown(wait=True)
        if self.isolation == "none":
            unconfined_closed()


_probe_results: dict[tuple[str, str, int], tuple[str | None, bool]] = {}
