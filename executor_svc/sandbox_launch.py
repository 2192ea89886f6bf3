"""How the process backend starts one worker: the staged program files, the environment, and the command line of each
sandbox (bubblewrap, the rootless launcher, none).

Both sandboxes give the worker the same view: the host's /usr (and /bin, /lib*, or their merged-/usr links) and the
interpreter's prefix read-only, the staged worker read-only at /azr/worker.py, a private size-capped /tmp, a minimal
/dev, a fresh /proc of its own pid namespace (or none where the kernel refuses one), no network, uid 65534, no
capabilities, a cleared environment. bubblewrap is used where installed; the rootless launcher
(executor_svc/rootless_launcher.py) builds the same thing with unshare(2) where it is not.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from executor_svc.errors import SandboxUnavailable
from executor_svc.rootless_launcher import CONFIG_VERSION, LaunchConfig

WORKER_SOURCE = Path(__file__).with_name("worker.py")
LAUNCHER_SOURCE = Path(__file__).with_name("rootless_launcher.py")
SANDBOX_WORKER_PATH = "/azr/worker.py"
SCRATCH_TMPFS_BYTES = 64 << 20  # the sandbox's /tmp lives in RAM: cap it
SYSTEM_PATH = "/usr/local/bin:/usr/bin:/bin"
SHARED_TMP = "/tmp" if os.path.isdir("/tmp") else None  # not $TMPDIR: every worker uid must reach the staged files
SANDBOX_ID = 65534
TOP_LEVEL = ("bin", "sbin", "lib", "lib32", "lib64", "libx32")


def worker_env(hash_seed: int) -> dict[str, str]:
    """The worker's whole environment: nothing of ours leaks in."""
    return {"PYTHONHASHSEED": str(hash_seed), "PYTHONUTF8": "1", "PYTHONDONTWRITEBYTECODE": "1"}


@dataclass(frozen=True)
class StagedProgram:
    """The worker and the rootless launcher, copied where every worker uid can read them and none can change them."""

    directory: str
    worker: str
    launcher: str


def _sources() -> dict[str, bytes]:
    return {"worker.py": WORKER_SOURCE.read_bytes(), "rootless_launcher.py": LAUNCHER_SOURCE.read_bytes()}


def stage_program() -> StagedProgram:
    """Copy the program files into a directory named by their content (one per version, reused, nothing to remove
    even after a SIGKILL), readable by all, writable by this uid only; refuse a directory someone else could change.

    Called before every worker start: a staged file that differs from the source (changed by a process of this uid
    outside any sandbox) is replaced first, so a worker never runs a program this service did not ship."""
    sources = _sources()
    digest = hashlib.sha256(b"".join(sources[name] for name in sorted(sources))).hexdigest()[:16]
    directory = os.path.join(SHARED_TMP or tempfile.gettempdir(), f"azr-worker-program-{os.geteuid()}-{digest}")
    try:
        os.mkdir(directory, 0o755)
    except FileExistsError:
        pass
    info = os.lstat(directory)
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.geteuid() or info.st_mode & 0o022:
        raise SandboxUnavailable(f"{directory} exists and is not ours alone: refusing to stage the worker there")
    os.chmod(directory, 0o755)  # whatever the umask: every worker uid must read its program
    for name, source in sources.items():
        path = os.path.join(directory, name)
        try:
            if os.lstat(path).st_uid == os.geteuid() and Path(path).read_bytes() == source:
                continue
        except OSError:
            pass
        handle, temporary = tempfile.mkstemp(dir=directory)
        with os.fdopen(handle, "wb") as stream:
            stream.write(source)
        os.chmod(temporary, 0o444)
        os.replace(temporary, path)  # atomic: concurrent executors never see a half-written file
    return StagedProgram(directory, os.path.join(directory, "worker.py"),
                         os.path.join(directory, "rootless_launcher.py"))


def host_view(python: str) -> tuple[list[str], dict[str, str]]:
    """(directories to bind read-only, top-level links to recreate) for running `python` in a sandbox."""
    binds, links = ["/usr"], {}
    for top in TOP_LEVEL:
        path = Path("/") / top
        if path.is_symlink():
            links[str(path)] = os.readlink(path)
        elif path.is_dir():
            binds.append(str(path))
    interpreter = os.path.realpath(python)
    if not interpreter.startswith("/usr/"):  # e.g. /opt/python3.11/bin/python3: bind its prefix read-only
        binds.append(str(Path(interpreter).parent.parent))
    return binds, links


def rootless_argv(launcher_python: str, python: str, staged: StagedProgram, hash_seed: int,
                  mount_proc: bool = True) -> list[str]:
    """The command line of the rootless launcher for one worker (its config travels as one JSON argument)."""
    binds, links = host_view(python)
    config: LaunchConfig = {"v": CONFIG_VERSION, "interpreter": os.path.realpath(python), "ro_binds": binds,
                            "symlinks": links, "worker": staged.worker, "worker_args": ["--own-pid-namespace"],
                            "env": worker_env(hash_seed), "tmp_bytes": SCRATCH_TMPFS_BYTES, "mount_proc": mount_proc}
    return [launcher_python, "-s", "-S", "-B", staged.launcher, json.dumps(config)]


def bwrap_argv(bwrap: str, python: str, worker_file: str, hash_seed: int, mount_proc: bool = True) -> list[str]:
    """The bubblewrap command line that runs one worker; `mount_proc`: give it a fresh /proc of its own pid
    namespace (False where the kernel refuses one: the worker then has no /proc)."""
    argv = [bwrap, "--unshare-all", "--unshare-user", "--die-with-parent", "--new-session",
            "--uid", str(SANDBOX_ID), "--gid", str(SANDBOX_ID), "--cap-drop", "ALL"]
    binds, links = host_view(python)
    for path in binds:
        argv += ["--ro-bind", path, path]
    for path, target in links.items():
        argv += ["--symlink", target, path]
    features = bwrap_features(bwrap)
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
    interpreter = os.path.realpath(python)
    return argv + ["--chdir", "/tmp", interpreter, "-s", "-S", "-B", SANDBOX_WORKER_PATH, "--own-pid-namespace"]


_features: dict[str, frozenset[str]] = {}


def bwrap_features(bwrap: str) -> frozenset[str]:
    """Optional flags this bubblewrap knows (--size and --disable-userns arrived in 0.8)."""
    if bwrap not in _features:
        try:
            text = subprocess.run([bwrap, "--help"], capture_output=True, text=True, timeout=10).stdout
        except (OSError, subprocess.SubprocessError):
            text = ""
        _features[bwrap] = frozenset(flag for flag in ("--size", "--disable-userns") if flag in text)
    return _features[bwrap]


def find_bwrap() -> str | None:
    """bubblewrap from the system's fixed PATH only (never a directory a user put first on theirs)."""
    return shutil.which("bwrap", path=SYSTEM_PATH)


INSTALLERS = (("apt-get", "sudo apt-get install -y bubblewrap"), ("dnf", "sudo dnf install -y bubblewrap"),
              ("yum", "sudo yum install -y bubblewrap"), ("zypper", "sudo zypper install -y bubblewrap"),
              ("pacman", "sudo pacman -S --noconfirm bubblewrap"), ("apk", "sudo apk add bubblewrap"))


def install_command() -> str:
    """The one command that installs bubblewrap on this machine (by its package manager; apt-get's when unknown)."""
    for manager, command in INSTALLERS:
        if shutil.which(manager, path=SYSTEM_PATH + ":/usr/sbin:/sbin"):
            return command
    return INSTALLERS[0][1]
