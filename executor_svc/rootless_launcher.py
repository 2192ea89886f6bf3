"""The rootless sandbox: start one worker in fresh user, PID, network, mount, IPC and UTS namespaces, without root.

What an unprivileged Linux user has where bubblewrap is not installed: `unshare(2)` (through ctypes; Python 3.11 has
no `os.unshare`), `mount(2)` and `pivot_root(2)` inside the new user namespace. Stdlib only, run as its own process:

    python3 -s -S -B rootless_launcher.py CONFIG_JSON        (environment: cleared; stdin/stdout: the worker's)

CONFIG_JSON is a `LaunchConfig` (below). The launcher (L) unshares, maps its own uid and gid to 65534 inside, and forks
the namespace's init (C, pid 1), which builds the sandbox's root and forks the worker (W, pid 2):

  /usr, /bin, /lib*, the interpreter's prefix   read-only binds of the host's (nosuid, nodev)
  /azr/worker.py                                 read-only bind of the staged worker, the only file of ours inside
  /tmp                                           a private size-capped tmpfs, the only writable place
  /dev                                           null, zero, full, random, urandom, bound from the host
  /proc                                          a fresh procfs of the new pid namespace (none where the kernel refuses
                                                 one: inside a container whose /proc is masked)
  everything else                                absent: the root is a read-only tmpfs holding only the above

No network interface but a loopback that is down, so nothing is reachable, loopback included. C and W drop every
capability (W by exec'ing as uid 65534, C with capset), set no-new-privileges, and C is not dumpable (no same-uid
ptrace of it). L and C die with their parent (PR_SET_PDEATHSIG), and the kernel kills every process of the pid
namespace when C exits, so nothing a program started outlives its worker.

Failures before the worker runs exit with status 125 and one line on stderr, `azr-rootless: <what>: <why>`; the
line for a kernel that refuses unprivileged user namespaces starts with `azr-rootless: unshare:`.
Limits: the sandbox shares the host's kernel (a kernel bug is a way out, as with bubblewrap); the outer uid is the
service's own unless the service is root (then each worker gets its own, see process_channel.py).
"""

from __future__ import annotations

import ctypes
import errno
import json
import os
import select
import signal
import sys
from typing import TypedDict

CONFIG_VERSION = 1
SETUP_FAILED = 125
SANDBOX_ID = 65534  # uid and gid inside (nobody / nogroup)

CLONE_NEWNS, CLONE_NEWCGROUP, CLONE_NEWUTS, CLONE_NEWIPC = 0x00020000, 0x02000000, 0x04000000, 0x08000000
CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET = 0x10000000, 0x20000000, 0x40000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REMOUNT = 1, 2, 4, 8, 32
MS_NOATIME, MS_NODIRATIME, MS_BIND, MS_REC, MS_PRIVATE, MS_RELATIME = 1024, 2048, 4096, 16384, 1 << 18, 1 << 21
MNT_DETACH = 2
PR_SET_PDEATHSIG, PR_SET_DUMPABLE, PR_CAPBSET_DROP, PR_SET_NO_NEW_PRIVS = 1, 4, 24, 38
PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL = 47, 4
CAPABILITY_VERSION_3 = 0x20080522
# pivot_root and capset have no glibc wrapper on every libc: call them by number.
SYSCALLS = {"x86_64": {"pivot_root": 155, "capset": 126}, "aarch64": {"pivot_root": 41, "capset": 91},
            "riscv64": {"pivot_root": 41, "capset": 91}, "ppc64le": {"pivot_root": 203, "capset": 184},
            "s390x": {"pivot_root": 217, "capset": 185}}
# statvfs flags -> the mount flags a remount inside a user namespace must keep (the kernel locks them)
LOCKED_FLAGS = ((os.ST_NOSUID, MS_NOSUID), (os.ST_NODEV, MS_NODEV), (os.ST_NOEXEC, MS_NOEXEC),
                (os.ST_NOATIME, MS_NOATIME), (os.ST_NODIRATIME, MS_NODIRATIME), (os.ST_RELATIME, MS_RELATIME))
DEVICES = ("null", "zero", "full", "random", "urandom")
BASE = "/tmp"  # where the scratch root is built, in our private mount namespace only (the host's /tmp is untouched)


class LaunchConfig(TypedDict):
    """What the process backend asks for (version 1); every path is absolute and already resolved on the host."""

    v: int
    interpreter: str  # the worker's python (realpath)
    ro_binds: list[str]  # host directories bound read-only at the same path (/usr, an interpreter prefix, ...)
    symlinks: dict[str, str]  # path -> target, e.g. /bin -> usr/bin on merged-/usr systems
    worker: str  # the staged worker.py, bound read-only at /azr/worker.py
    worker_args: list[str]
    env: dict[str, str]  # the worker's whole environment
    tmp_bytes: int  # size cap of the private /tmp
    mount_proc: bool  # a fresh /proc of the new pid namespace, or none at all


class SetupError(Exception):
    """One step of building the sandbox failed; the message names it and the errno."""


_libc = ctypes.CDLL(None, use_errno=True)
_libc.mount.argtypes = (ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p)
_libc.prctl.argtypes = (ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong)
_libc.unshare.argtypes = (ctypes.c_int,)


def _check(result: int, what: str) -> int:
    if result == -1:
        code = ctypes.get_errno()
        raise SetupError(f"{what}: {os.strerror(code) if code else 'failed'}")
    return result


def _bytes(path: str | None) -> bytes | None:
    return None if path is None else os.fsencode(path)


def mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    _check(_libc.mount(_bytes(source), _bytes(target), _bytes(fstype), flags, _bytes(data)),
           f"mount {source or fstype} on {target}")


def prctl(option: int, arg: int = 0, arg3: int = 0) -> None:
    _check(_libc.prctl(option, arg, arg3, 0, 0), f"prctl({option})")


def _syscall(name: str, *args: object) -> int:
    numbers = SYSCALLS.get(os.uname().machine)
    if numbers is None:
        raise SetupError(f"{name}: no syscall number known for {os.uname().machine}")
    return _check(_libc.syscall(ctypes.c_long(numbers[name]), *args), name)


def _write(path: str, text: str) -> None:
    try:
        fd = os.open(path, os.O_WRONLY)
        try:
            os.write(fd, text.encode())
        finally:
            os.close(fd)
    except OSError as exc:
        raise SetupError(f"write {path}: {exc.strerror}") from None


def enter_namespaces() -> None:
    """Unshare every namespace, then map our uid and gid to 65534 inside (the only mapping an unprivileged user may
    write: its own ids, one line, setgroups denied)."""
    uid, gid = os.getuid(), os.getgid()
    flags = CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS | CLONE_NEWCGROUP
    _check(_libc.unshare(flags), "unshare")
    _write("/proc/self/setgroups", "deny")
    _write("/proc/self/uid_map", f"{SANDBOX_ID} {uid} 1")
    _write("/proc/self/gid_map", f"{SANDBOX_ID} {gid} 1")


def _locked_flags(path: str) -> int:
    flags = os.statvfs(path).f_flag
    return sum(mount_flag for vfs_flag, mount_flag in LOCKED_FLAGS if flags & vfs_flag)


def _unescape(field: bytes) -> str:
    """A mountinfo path: octal escapes (`\\040` for a space) decoded without a codec (the stdlib is out of reach
    once the host's root is gone, and codecs load lazily)."""
    parts = field.split(b"\\")
    raw = bytearray(parts[0])
    for part in parts[1:]:
        raw += bytes([int(part[:3], 8)]) + part[3:]
    return os.fsdecode(bytes(raw))


def _submounts(target: str) -> list[str]:
    """Mount points at or below `target`, deepest last (our own mountinfo, through the host's /proc at /oldroot)."""
    found = []
    with open("/oldroot/proc/self/mountinfo", "rb") as stream:
        for line in stream:
            point = _unescape(line.split()[4])
            if point == target or point.startswith(target.rstrip("/") + "/"):
                found.append(point)
    return sorted(found, key=len)


def bind_read_only(source: str, target: str) -> None:
    """Recursive bind, then every mount of it remounted read-only, nosuid, nodev (keeping the flags it had)."""
    mount(source, target, None, MS_BIND | MS_REC)
    for point in _submounts(target):
        try:
            flags = _locked_flags(point)
        except OSError:
            continue  # a mount we cannot even stat (e.g. an autofs point): nothing to read there
        mount(None, point, None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV | flags)


def build_root(config: LaunchConfig) -> None:
    """Build the sandbox's root under a scratch tmpfs, then make it `/` (run by pid 1 of the new pid namespace)."""
    mount(None, "/", None, MS_REC | MS_PRIVATE)  # nothing we mount propagates back to the host
    mount("tmpfs", BASE, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=1m")
    os.mkdir(BASE + "/newroot", 0o755)
    os.mkdir(BASE + "/oldroot", 0o755)
    _syscall("pivot_root", _bytes(BASE), _bytes(BASE + "/oldroot"))  # `/` is the scratch tmpfs; the host is /oldroot
    os.chdir("/")
    new, old = "/newroot", "/oldroot"
    mount("tmpfs", new, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=1m")
    for path in config["ro_binds"]:
        os.makedirs(new + path, 0o755, exist_ok=True)
        bind_read_only(old + path, new + path)
    for path, target in config["symlinks"].items():
        os.symlink(target, new + path)
    os.mkdir(new + "/azr", 0o755)
    open(new + "/azr/worker.py", "wb").close()
    bind_read_only(old + config["worker"], new + "/azr/worker.py")
    os.mkdir(new + "/tmp", 0o1777)
    mount("tmpfs", new + "/tmp", "tmpfs", MS_NOSUID | MS_NODEV,
          f"mode=1777,size={config['tmp_bytes']},uid={SANDBOX_ID},gid={SANDBOX_ID}")
    os.mkdir(new + "/dev", 0o755)
    for name in DEVICES:
        open(new + "/dev/" + name, "wb").close()
        mount(old + "/dev/" + name, new + "/dev/" + name, None, MS_BIND)
    for name, target in (("fd", "/proc/self/fd"), ("stdin", "/proc/self/fd/0"), ("stdout", "/proc/self/fd/1"),
                         ("stderr", "/proc/self/fd/2")):
        os.symlink(target, new + "/dev/" + name)
    os.mkdir(new + "/proc", 0o555)
    if config["mount_proc"]:
        mount("proc", new + "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    os.chdir(new)
    _syscall("pivot_root", b".", b".")  # the old root now sits on top of the new one: detach it
    _check(_libc.umount2(b".", MNT_DETACH), "umount the host's root")
    os.chdir("/")
    mount(None, "/", None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV)


def drop_privileges() -> None:
    """No capability left in any set, none to regain: bounding set emptied, ambient cleared, no-new-privileges."""
    cap = 0
    while True:
        if _libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) == -1:
            if ctypes.get_errno() == errno.EINVAL:  # past the last capability this kernel knows
                break
            raise SetupError(f"drop capability {cap}: {os.strerror(ctypes.get_errno())}")
        cap += 1
    try:
        prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL)
    except SetupError:
        pass  # kernels before 4.3 have no ambient set
    prctl(PR_SET_NO_NEW_PRIVS, 1)


def clear_capabilities() -> None:
    """Empty this process's effective, permitted and inheritable sets (capset), for pid 1 which never execs."""
    header = (ctypes.c_uint32 * 2)(CAPABILITY_VERSION_3, 0)
    data = (ctypes.c_uint32 * 6)()
    _syscall("capset", ctypes.byref(header), ctypes.byref(data))


def init_main(config: LaunchConfig, launcher_alive: int) -> int:
    """pid 1 of the sandbox: build it, start the worker, reap everything, exit with the worker's status.
    `launcher_alive`: the read end of a pipe the launcher holds open for as long as it lives."""
    prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    poller = select.poll()
    poller.register(launcher_alive, select.POLLIN)
    if poller.poll(0):  # the launcher died before we asked to follow it: end here
        return SETUP_FAILED
    os.close(launcher_alive)
    build_root(config)
    _libc.sethostname(b"azr-sandbox", 11)
    os.setsid()  # no controlling terminal to push input into
    drop_privileges()
    worker = os.fork()
    if worker == 0:
        try:
            os.chdir("/tmp")
            argv = [config["interpreter"], "-s", "-S", "-B", "/azr/worker.py", *config["worker_args"]]
            os.execve(config["interpreter"], argv, config["env"])
        except BaseException as exc:
            os.write(2, f"azr-rootless: exec {config['interpreter']}: {exc}\n".encode())
        os._exit(SETUP_FAILED)
    clear_capabilities()
    prctl(PR_SET_DUMPABLE, 0)
    os.closerange(0, 3)  # the worker holds the protocol; pid 1 only reaps
    while True:
        try:
            pid, status = os.waitpid(-1, 0)
        except ChildProcessError:
            return SETUP_FAILED
        if pid == worker:
            return 128 + os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)


def main(argv: list[str]) -> int:
    try:
        config: LaunchConfig = json.loads(argv[0])
        if config.get("v") != CONFIG_VERSION:
            raise SetupError(f"config version {config.get('v')!r}, expected {CONFIG_VERSION}")
        parent = os.getppid()
        prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != parent:  # the executor died before we asked to follow it
            return SETUP_FAILED
        enter_namespaces()
        alive_read, alive_write = os.pipe()
        init = os.fork()  # the first child of a new pid namespace is its pid 1
        if init == 0:
            code = SETUP_FAILED
            try:
                os.close(alive_write)
                code = init_main(config, alive_read)
            except SetupError as exc:
                os.write(2, (f"azr-rootless: {exc}\n").encode())
            except BaseException as exc:
                os.write(2, (f"azr-rootless: pid 1: {type(exc).__name__}: {exc}\n").encode())
            os._exit(code)
        os.close(alive_read)
        os.closerange(0, 3)
        _, status = os.waitpid(init, 0)
        return 128 + os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
    except SetupError as exc:
        sys.stderr.write(f"azr-rootless: {exc}\n")
        return SETUP_FAILED
    except (ValueError, KeyError, IndexError, TypeError) as exc:
        sys.stderr.write(f"azr-rootless: bad config: {exc}\n")
        return SETUP_FAILED


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
