"""The `process` backend: long-lived worker processes on this host, each wrapped in bubblewrap where it works.

Launch (docs/design.md §3): an absolute interpreter (never the PATH shim), `-s -S -B`, a
cleared environment with an explicit PYTHONHASHSEED (never `-I`, which ignores it). With bubblewrap the worker gets
private user/pid/net/ipc/uts/mount namespaces, uid 65534, no capabilities, a read-only root and /usr, a size-capped
private /tmp (the only writable place), and no view of the host's files. Its /proc is a fresh one of its own pid
namespace; where that cannot be mounted (bubblewrap inside a container, e.g. a Kubernetes pod, whose /proc has masked
paths: the kernel then refuses a new procfs) the worker gets no /proc at all, never the outer one (which would show
the executor's processes and their environment). When this process is root the launcher
itself drops to uid 65534 before starting bwrap (or the bare worker): RLIMIT_NPROC is never enforced for processes
that are root outside, so only an unprivileged outer uid makes the per-task process cap real.

Workers are spawned from one dedicated thread: bubblewrap's --die-with-parent follows the *thread* that spawned it,
so a worker started from a short-lived request thread would die with that thread.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import stat
import subprocess
import tempfile
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Literal

from executor_svc.channel import ReplyTimeout, WorkerLost
from executor_svc.errors import SandboxUnavailable
from executor_svc.process_channel import NOBODY, ProcessWorkerChannel, launch_uid
from executor_svc.worker import PROTOCOL_VERSION

log = logging.getLogger(__name__)

SandboxMode = Literal["auto", "bwrap", "none"]
WORKER_SOURCE = Path(__file__).with_name("worker.py")
SANDBOX_WORKER_PATH = "/azr/worker.py"
SCRATCH_TMPFS_BYTES = 64 << 20  # the sandbox's /tmp lives in RAM: cap it
SYSTEM_PATH = "/usr/local/bin:/usr/bin:/bin"
SHARED_TMP = "/tmp" if os.path.isdir("/tmp") else None  # not $TMPDIR: uid 65534 must reach the staged files


def worker_env(hash_seed: int) -> dict[str, str]:
    """The worker's whole environment: nothing of ours leaks in."""
    return {"PYTHONHASHSEED": str(hash_seed), "PYTHONUTF8": "1", "PYTHONDONTWRITEBYTECODE": "1"}


def bwrap_argv(bwrap: str, python: str, worker_file: str, hash_seed: int, mount_proc: bool = True) -> list[str]:
    """The bubblewrap command line that runs one worker; `mount_proc`: give it a fresh /proc of its own pid
    namespace (False where the kernel refuses one: the worker then has no /proc)."""
    argv = [bwrap, "--unshare-all", "--unshare-user", "--die-with-parent", "--new-session",
            "--uid", str(NOBODY), "--gid", str(NOBODY), "--cap-drop", "ALL", "--ro-bind", "/usr", "/usr"]
    for top in ("bin", "sbin", "lib", "lib32", "lib64", "libx32"):
        path = Path("/") / top
        if path.is_symlink():
            argv += ["--symlink", os.readlink(path), str(path)]
        elif path.is_dir():
            argv += ["--ro-bind", str(path), str(path)]
    interpreter = os.path.realpath(python)
    if not interpreter.startswith("/usr/"):  # e.g. /opt/python3.11/bin/python3: bind its prefix read-only
        prefix = str(Path(interpreter).parent.parent)
        argv += ["--ro-bind", prefix, prefix]
    features = _bwrap_features(bwrap)
    argv += (["--proc", "/proc"] if mount_proc else []) + ["--dev", "/dev"]
    argv += (["--size", str(SCRATCH_TMPFS_BYTES)] if "--size" in features else []) + ["--tmpfs", "/tmp"]
    # --disable-userns writes the sandbox's user.max_user_namespaces through its fresh /proc: without one it cannot
    # (the sandbox may then nest user namespaces, inside which there is still no network and no host file).
    argv += ["--disable-userns"] if "--disable-userns" in features and mount_proc else []
    argv += ["--ro-bind", worker_file, SANDBOX_WORKER_PATH]
    argv += ["--remount-ro", "/dev", "--remount-ro", "/"]  # only the size-capped /tmp stays writable
    argv += ["--clearenv"]
    for key, value in worker_env(hash_seed).items():
        argv += ["--setenv", key, value]
    return argv + ["--chdir", "/tmp", interpreter, "-s", "-S", "-B", SANDBOX_WORKER_PATH, "--own-pid-namespace"]


_features: dict[str, frozenset[str]] = {}


BWRAP_MISSING = "bwrap is not installed"


def bwrap_advice(reason: str) -> str:
    """How to get the sandbox working, for the `bubblewrap unusable` line: install it, or let it run."""
    if reason == BWRAP_MISSING:
        return ("To sandbox generated code, install bubblewrap: `sudo apt-get install bubblewrap` (Debian, Ubuntu), "
                "`sudo dnf install bubblewrap` (Fedora), `sudo pacman -S bubblewrap` (Arch); docs/isolation.md")
    return ("Installed but failing is most often unprivileged user namespaces turned off: `sysctl "
            "user.max_user_namespaces` must be above 0, and on Ubuntu 23.10 and later `sudo sysctl "
            "kernel.apparmor_restrict_unprivileged_userns=0` allows them; docs/isolation.md")


def _bwrap_features(bwrap: str) -> frozenset[str]:
    """Optional flags this bubblewrap knows (--size and --disable-userns arrived in 0.8)."""
    if bwrap not in _features:
        try:
            text = subprocess.run([bwrap, "--help"], capture_output=True, text=True, timeout=10).stdout
        except (OSError, subprocess.SubprocessError):
            text = ""
        _features[bwrap] = frozenset(flag for flag in ("--size", "--disable-userns") if flag in text)
    return _features[bwrap]


def stage_worker() -> str:
    """A copy of worker.py that uid 65534 can read and nobody else can change; one per content, reused.

    Content-addressed, so workers started later by a long-lived executor run the same program as the first ones even
    if the source changes meanwhile; and nothing needs removing, even after a SIGKILL.
    """
    source = WORKER_SOURCE.read_bytes()
    directory = os.path.join(SHARED_TMP or tempfile.gettempdir(),
                             f"azr-worker-program-{os.geteuid()}-{hashlib.sha256(source).hexdigest()[:16]}")
    try:
        os.mkdir(directory, 0o755)
    except FileExistsError:
        pass
    info = os.lstat(directory)
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.geteuid() or info.st_mode & 0o022:
        raise SandboxUnavailable(f"{directory} exists and is not ours alone: refusing to stage the worker there")
    os.chmod(directory, 0o755)  # whatever the umask: the worker runs as uid 65534 and must read its program
    path = os.path.join(directory, "worker.py")
    try:
        if Path(path).read_bytes() == source:
            return path
    except OSError:
        pass
    handle, temporary = tempfile.mkstemp(dir=directory)
    with os.fdopen(handle, "wb") as stream:
        stream.write(source)
    os.chmod(temporary, 0o444)
    os.replace(temporary, path)  # atomic: concurrent executors never see a half-written file
    return path


_probe_results: dict[tuple[str, int], tuple[str | None, bool]] = {}


class ProcessBackend:
    """Channel factory of the process backend: `backend(hash_seed)` starts one worker. Call close() when done."""

    def __init__(self, python: str, sandbox: SandboxMode = "auto") -> None:
        if not os.path.isabs(python) or not os.access(python, os.X_OK):
            raise SandboxUnavailable(f"executor_python must be an absolute path to an interpreter, got {python!r}")
        self.python = python
        self.worker_file = stage_worker()
        self._spawner = ThreadPoolExecutor(max_workers=1, thread_name_prefix="azr-spawn")
        self._lock = threading.Lock()
        self._closed = False
        self.mount_proc = True  # whether bubblewrapped workers get a fresh /proc (settled by _resolve)
        try:
            self.isolation = self._resolve(sandbox)
        except BaseException:
            self.close()
            raise

    def __call__(self, hash_seed: int) -> ProcessWorkerChannel:
        with self._lock:
            if self._closed:
                raise SandboxUnavailable("the process backend is closed")
            return self._spawner.submit(self._start, hash_seed, self.isolation, self.mount_proc).result()

    def _start(self, hash_seed: int, isolation: str, mount_proc: bool = True) -> ProcessWorkerChannel:
        if isolation == "bwrap":
            argv = bwrap_argv(self._bwrap(), self.python, self.worker_file, hash_seed, mount_proc)
            return ProcessWorkerChannel(argv, env={})
        scratch = tempfile.mkdtemp(prefix="azr-scratch-", dir=SHARED_TMP)
        if (uid := launch_uid()) is not None:
            os.chown(scratch, uid, uid)
        argv = [self.python, "-s", "-S", "-B", self.worker_file, "--scratch", scratch]
        return ProcessWorkerChannel(argv, env=worker_env(hash_seed), scratch_dir=scratch)

    @staticmethod
    def _bwrap() -> str:
        return shutil.which("bwrap", path=SYSTEM_PATH) or "bwrap"

    def _resolve(self, sandbox: SandboxMode) -> str:
        """'bwrap' or 'none'; `bwrap` fails loudly when bubblewrap cannot run a worker here."""
        if sandbox == "none":
            return "none"
        reason, self.mount_proc = self._probe_bwrap()
        if reason is None:
            if not self.mount_proc:
                log.info("bubblewrap cannot mount a fresh /proc here (a container's masked /proc); sandbox workers "
                         "run without /proc")
            return "bwrap"
        if sandbox == "bwrap":
            raise SandboxUnavailable(f"executor_sandbox='bwrap' but bubblewrap cannot run a worker: {reason}")
        log.warning("bubblewrap unusable (%s); sandbox workers run with rlimits only. %s", reason, bwrap_advice(reason))
        return "none"

    def _probe_bwrap(self) -> tuple[str | None, bool]:
        """(why a bubblewrapped worker cannot start and answer a ping, or None when it can; whether it gets a fresh
        /proc), cached per process. A worker with /proc is tried first, then one without."""
        key = (self.python, os.geteuid())
        if key not in _probe_results:
            _probe_results[key] = self._run_probes()
        return _probe_results[key]

    def _run_probes(self) -> tuple[str | None, bool]:
        if shutil.which("bwrap", path=SYSTEM_PATH) is None:
            return BWRAP_MISSING, True
        with_proc = self._run_probe(mount_proc=True)
        if with_proc is None:
            return None, True
        without_proc = self._run_probe(mount_proc=False)
        if without_proc is None:
            return None, False
        return f"{with_proc} (and without /proc: {without_proc})", True

    def _run_probe(self, mount_proc: bool) -> str | None:
        try:
            channel = self._spawner.submit(self._start, 0, "bwrap", mount_proc).result()
        except SandboxUnavailable as exc:
            return str(exc)
        try:
            channel.send({"v": PROTOCOL_VERSION, "id": "probe", "op": "ping"})
            reply = channel.receive(20.0)
            return None if reply.get("ok") else f"bad ping reply {reply!r}"
        except (WorkerLost, ReplyTimeout) as exc:
            return str(exc)
        finally:
            channel.close()

    def close(self) -> None:
        with self._lock:
            self._closed = True
        self._spawner.shutdown(wait=True)
