"""AZR sandbox worker: a single-threaded fork-server that runs model-written Python, one fresh child per job.

Stdlib only and self-contained (one file, shipped as is into every sandbox): it runs as `python3 -s -S -B worker.py
[--scratch DIR] [--own-pid-namespace]` under any python3 >= 3.9, with nothing of the project importable (bubblewrap,
the rootless sandbox, a Docker image, or a plain process). Start it with a cleared environment and an explicit
PYTHONHASHSEED (never `-I`: it ignores PYTHONHASHSEED).

Wire protocol, version 2: JSON lines. The worker reads one request line on stdin and writes exactly one reply line
on stdout; every message carries `"v": 2`. Program output never reaches these streams: the worker moves its protocol
to private fds at start, and each child's fds 0-2 are /dev/null.

  request  {"v": 2, "id": ID, "op": "ping"}
  reply    {"v": 2, "id": ID, "ok": true, "pid": int, "uid": int, "python": "3.11.2", "hash_seed": "0",
            "str_hash": hash("azr-probe"), "ignore_environment": 0, "exec_denied": bool}
  request  {"v": 2, "id": ID, "op": "run", "stop_on_failure": bool, "jobs": [JOB, ...],
            "limits": {"timeout_s": float, "memory_mb": int, "max_output_bytes": int, "max_processes": int}}
  reply    {"v": 2, "id": ID, "ok": true, "results": [RESULT, ...]}   (stops after the first failed job if asked)
  request  {"v": 2, "id": ID, "op": "exit"}          reply {"v": 2, "id": ID, "ok": true}, then the worker exits
  any bad request gets {"v": 2, "id": ID, "ok": false, "error": "..."}; an internal failure of the worker gets
  {"v": 2, "id": null, "ok": false, "fatal": true, "error": "..."} and the worker exits

  JOB is {"kind": "call", "program": source defining `f`, "args": argument source, "args_mode": MODE}: run f(<args>).
    MODE says how the arguments become values:
      "source"      evaluated as written, in the program's names, after the program ran (a proposer's own inputs);
      "literal"     a literal the executor has already read (executor_svc/literals.py), evaluated BEFORE the program
                    runs, with no builtins and only the constructors a repr shows (set, frozenset, Counter, ...):
                    nothing the program does can touch them;
      "restricted"  an answer that needs the program's own names (a class of the program, a lambda, an iterator),
                    evaluated after the program ran with only the program's functions and classes (no module) and
                    builtins without the reflective and importing ones.
  RESULT is {"status", "error"?, "ms", "output"?: repr(f(args)), "none"?: the result is None}; status is one of
  ok, syntax_error, no_function, runtime_error, timeout, memory, output_too_large, crashed (each is also a
  services.execution.ExecStatus value).

Verdicts are not made here. No gold value ever enters the sandbox: the executor compares the `output` this worker
reports with the gold output in its own process, reading both as literals. A program can make its own result say
anything (it shares the child's process with the code that reports it), which is what returning that value does;
what it cannot reach is anything else: the worker (not dumpable, so no ptrace and no /proc/<pid>/fd or mem of it),
another job's result, or the gold value.

Per job: fork; the child joins its own process group (not a new session: an unsandboxed worker's leftovers stay
findable in its session), points fds 0-2 at /dev/null, closes every other inherited fd, moves its result pipe to a
high fd, chdirs into a fresh private scratch dir, sets rlimits (AS, CPU, FSIZE, NOFILE, CORE, NPROC), turns exec off
(a seccomp filter: execve and execveat fail with EPERM, in the job and whatever it forks), then execs the program in
fresh module globals. The parent enforces the wall deadline, reads at most a capped number of bytes, SIGKILLs the
child's process group, then sweeps what the job left (Worker._sweep): with --own-pid-namespace every other process
in the sandbox, otherwise every child reparented to this worker (it is a child subreaper).
Limits: without ctypes (a stripped python) there is no exec filter, no subreaper and the worker stays dumpable; the
`ping` reply's `exec_denied` says which.
"""

from __future__ import annotations

import ast
import builtins
import json
import os
import resource
import select
import shutil
import signal
import sys
import time
import types
from collections.abc import Callable
from typing import Any, Literal, TypedDict  # typing is preloaded for the programs anyway (PRELOADED)

PROTOCOL_VERSION = 2
FILE_SIZE_LIMIT = 1 << 20  # largest file a program may write in its scratch dir
OPEN_FILES_LIMIT = 64
RESULT_FD_BASE = 200  # the child's result pipe moves here, away from the fds a blind writer tries first
PRELOADED = ("collections", "itertools", "functools", "heapq", "math", "cmath", "re", "string", "bisect", "copy",
             "operator", "fractions", "decimal", "typing", "dataclasses", "enum", "array", "textwrap",
             "unicodedata", "numbers", "keyword", "types", "abc", "contextlib")
STATUSES = ("ok", "syntax_error", "no_function", "runtime_error", "timeout", "memory", "output_too_large", "crashed")
ARGS_MODES = ("source", "literal", "restricted")

# Captured before any program runs: a program may rebind builtins or json functions in its own child.
_repr, _type, _len, _isinstance, _callable, _compile, _eval, _exec, _str = (
    repr, type, len, isinstance, callable, compile, eval, exec, str)
_dumps, _loads = json.dumps, json.loads
PRISTINE_BUILTINS = dict(builtins.__dict__)
_dict_update, _dict_items = dict.update, dict.items
_JSON_ESCAPES = {code: "\\u%04x" % code for code in range(32)}
_JSON_ESCAPES.update({ord('"'): '\\"', ord("\\"): "\\\\"})
MEMORY_RESULT = {"status": "memory", "error": "MemoryError: the memory limit was reached"}
RESTRICTED_AWAY = ("__import__", "__build_class__", "__loader__", "__spec__", "eval", "exec", "compile", "open",
                   "getattr", "setattr", "delattr", "vars", "globals", "locals", "type", "breakpoint", "input",
                   "help", "memoryview", "exit", "quit", "object", "super", "classmethod", "staticmethod",
                   "property")
"""Builtins a restricted answer never gets (the static answer rules refuse their names too)."""
RESTRICTED_BUILTINS = {name: value for name, value in PRISTINE_BUILTINS.items() if name not in RESTRICTED_AWAY}
PR_SET_DUMPABLE, PR_SET_CHILD_SUBREAPER, PR_SET_NO_NEW_PRIVS, PR_SET_SECCOMP = 4, 36, 38, 22
SWEEP_DEADLINE_S = 2.0  # killing a job's leftovers round after round stops here (a fork bomb is capped by NPROC)
SUBREAPER = False  # set by main(): orphans of our jobs come back to this worker
EXEC_FILTER: Any = None  # set by main(): (libc, address of the seccomp program, its owner) or None (no ctypes, ...)


# ---------------------------------------------------------------- wire types: the protocol above, for type checkers
# The executor builds its requests with these (executor_svc/worker_messages.py); here they only annotate. Requests
# arrive as untrusted JSON: the worker still checks every field it reads, as the docstring says.


class CallJob(TypedDict):
    """Run `f(<args>)`; the RESULT carries `output` (its repr) and `none`."""

    kind: Literal["call"]
    program: str
    args: str
    args_mode: Literal["source", "literal", "restricted"]


class Limits(TypedDict):
    """The per-job limits of a `run` request."""

    timeout_s: float
    memory_mb: int
    max_output_bytes: int
    max_processes: int


class RunRequest(TypedDict):
    """A `run` request as the executor builds it; its worker pool adds the envelope (`v`, `id`)."""

    op: Literal["run"]
    jobs: list[CallJob]
    stop_on_failure: bool
    limits: Limits


class Outcome(Exception):
    """A job ends early with a status other than a plain runtime error."""

    def __init__(self, status: str, error: str) -> None:
        super().__init__(error)
        self.status, self.error = status, error


# ---------------------------------------------------------------- child side: runs untrusted code, then _exit


def _restore_builtins() -> None:
    """Undo what the program did to the builtins before our own code runs again in this child."""
    _dict_update(builtins.__dict__, PRISTINE_BUILTINS)  # rebinds what it changed or deleted


def _encode(result: dict) -> bytes:
    """JSON for a flat RESULT, without the json module (a program may have patched it)."""
    parts = []
    for key, value in _dict_items(result):
        if value is None or value is True or value is False:
            text = {None: "null", True: "true", False: "false"}[value]
        elif _type(value) in (int, float):
            text = _repr(value)
        else:
            text = '"%s"' % _str(value).translate(_JSON_ESCAPES)
        parts.append('"%s": %s' % (key, text))
    return ("{%s}" % ", ".join(parts)).encode("utf-8", "surrogatepass")


def _short(exc: BaseException) -> str:
    try:
        text = "%s: %s" % (_type(exc).__name__, exc)
    except BaseException:
        text = _type(exc).__name__
    return text if _len(text) <= 300 else text[:297] + "..."


def _compile_source(source: str, mode: str, what: str) -> types.CodeType:
    try:
        return _compile(source, "<%s>" % what, mode, dont_inherit=True)
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        raise Outcome("syntax_error", "%s does not compile: %s" % (what, _short(exc)))


def _load_program(source: str) -> dict:
    """Exec the program in fresh module globals; return them. `f` must be callable."""
    code = _compile_source(source, "exec", "program")
    module = types.ModuleType("__azr__")  # registered so dataclasses & co. find their module
    sys.modules["__azr__"] = module
    namespace = module.__dict__
    namespace["__builtins__"] = builtins
    _exec(code, namespace)
    if not _callable(namespace.get("f")):
        raise Outcome("no_function", "the program defines no callable f")
    return namespace


def _argument_code(source: str) -> types.CodeType:
    """Argument source as it would be in `f(<source>)`, compiled to build (args, kwargs) with `__azr_collect__`."""
    try:
        tree = ast.parse("__azr_collect__(%s\n)" % source, "<input>", "eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        raise Outcome("syntax_error", "input does not parse: %s" % _short(exc))
    call = tree.body
    # narrowed by the captured `_isinstance` (a program may rebind the builtin), which mypy does not follow
    if not (_isinstance(call, ast.Call) and _isinstance(call.func, ast.Name) and call.func.id == "__azr_collect__"):  # type: ignore[attr-defined]
        raise Outcome("syntax_error", "input is not an argument list")
    try:
        return _compile(tree, "<input>", "eval", dont_inherit=True)
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        raise Outcome("syntax_error", "input does not compile: %s" % _short(exc))


def _gather_args(*args, **kwargs) -> tuple:
    return args, kwargs


def _literal_names() -> dict:
    """The names executor_svc/literals.py lets a literal use, bound to the real constructors."""
    import collections
    import decimal
    import fractions
    return {"set": set, "frozenset": frozenset, "list": list, "tuple": tuple, "dict": dict,
            "Counter": collections.Counter, "OrderedDict": collections.OrderedDict, "deque": collections.deque,
            "bytearray": bytearray, "range": range, "slice": slice, "Decimal": decimal.Decimal,
            "Fraction": fractions.Fraction, "float": float, "inf": float("inf"), "nan": float("nan"),
            "Ellipsis": Ellipsis, "__azr_collect__": _gather_args}


def _restricted_names(namespace: dict) -> dict:
    """What a restricted answer may name: the program's own top-level values but modules and dunders."""
    names = {name: value for name, value in _dict_items(namespace)
             if not name.startswith("__") and not _isinstance(value, types.ModuleType)}
    names["__builtins__"] = RESTRICTED_BUILTINS
    names["__azr_collect__"] = _gather_args
    return names


def _job_call(job: CallJob, limits: Limits) -> dict:
    mode = job.get("args_mode", "source")
    code = _argument_code(job["args"])
    if mode == "literal":  # built before the program exists: nothing it does reaches these values
        args, kwargs = _eval(code, {"__builtins__": {}}, LITERAL_NAMES)
        namespace = _load_program(job["program"])
    else:
        namespace = _load_program(job["program"])
        scope = _restricted_names(namespace) if mode == "restricted" else namespace
        args, kwargs = _eval(code, scope, {"__azr_collect__": _gather_args})
    value = namespace["f"](*args, **kwargs)
    _restore_builtins()
    return {"status": "ok", "output": _repr_capped(value, limits["max_output_bytes"]), "none": value is None}


def _repr_capped(value, limit: int) -> str:
    try:
        text = _repr(value)
    except MemoryError:
        raise
    except BaseException as exc:
        raise Outcome("runtime_error", "repr of the result failed: " + _short(exc))
    size = _len(text.encode("utf-8", "surrogatepass"))
    if size > limit:
        raise Outcome("output_too_large", "repr of the result is %d bytes, limit %d" % (size, limit))
    return text


JOB_KINDS: dict[str, Callable[[Any, Limits], dict]] = {"call": _job_call}


def _isolate_fds(result_fd: int) -> int:
    """fds 0-2 -> /dev/null, the result pipe -> a high fd, every other inherited fd closed."""
    target = RESULT_FD_BASE + (os.getpid() % 50)
    try:
        os.dup2(result_fd, target)
    except OSError:  # a low RLIMIT_NOFILE (e.g. docker --ulimit nofile=64): keep the pipe where it is
        target = result_fd
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    try:  # bound the range by the highest open fd: closerange() is a loop of close() before Python 3.10
        highest = max(int(name) for name in os.listdir("/proc/self/fd"))
    except (OSError, ValueError):
        highest = min(resource.getrlimit(resource.RLIMIT_NOFILE)[0], 1 << 16)
    os.closerange(3, target)
    os.closerange(target + 1, max(target + 1, highest + 1))
    return target


def _apply_limits(limits: Limits) -> None:
    def cap(which: int, value: int, slack: int = 0) -> None:
        _, hard = resource.getrlimit(which)
        limit = (value, value + slack)
        if hard != resource.RLIM_INFINITY:
            limit = (min(value, hard), min(value + slack, hard))
        try:
            resource.setrlimit(which, limit)
        except (ValueError, OSError):
            pass

    # The wall deadline normally fires first; CPU time runs faster than the wall clock with threads. SIGXCPU at the
    # soft limit (reported as a timeout) comes a second before the SIGKILL of the hard limit.
    cap(resource.RLIMIT_CPU, int(limits["timeout_s"]) + 2, slack=1)
    cap(resource.RLIMIT_AS, int(limits["memory_mb"]) << 20)
    cap(resource.RLIMIT_FSIZE, FILE_SIZE_LIMIT)
    cap(resource.RLIMIT_NOFILE, OPEN_FILES_LIMIT)
    cap(resource.RLIMIT_CORE, 0)
    cap(resource.RLIMIT_NPROC, int(limits["max_processes"]))


def deny_exec() -> None:
    """Install EXEC_FILTER: from here on execve/execveat fail with EPERM in this process and all it forks (no program
    is run but the one we exec'ed: no shell, no setuid binary, no /usr/bin/id). Needs no-new-privileges first."""
    if EXEC_FILTER is None:
        return
    libc, program, _ = EXEC_FILTER
    if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 or libc.prctl(PR_SET_SECCOMP, 2, program, 0, 0) != 0:
        os._exit(3)  # never run a job without the filter we announced (the parent reports `crashed`)


def child_main(job: dict, limits: Limits, result_fd: int, scratch: str) -> None:
    """Runs in the forked child; never returns."""
    try:
        os.setpgid(0, 0)
        result_fd = _isolate_fds(result_fd)
        os.chdir(scratch)
        _apply_limits(limits)
        deny_exec()
        memory_payload = _encode(MEMORY_RESULT)
        started = time.perf_counter()
        try:
            result = JOB_KINDS[job["kind"]](job, limits)
        except Outcome as outcome:
            result = {"status": outcome.status, "error": outcome.error}
        except MemoryError:
            result = None
        except BaseException as exc:  # SystemExit and KeyboardInterrupt too: the program's own fault
            result = {"status": "runtime_error", "error": _short(exc)}
        if result is None:
            payload = memory_payload
        else:
            _restore_builtins()
            result["ms"] = round((time.perf_counter() - started) * 1000, 3)
            payload = _encode(result)
        view = memoryview(payload)
        while view:
            view = view[os.write(result_fd, view):]
        os.close(result_fd)  # EOF now, not after the (slow) teardown of the address space
    finally:
        os._exit(0)


# ---------------------------------------------------------------- parent side: the fork-server


class Worker:
    """The fork-server loop state: scratch root, task counter, sandbox mode."""

    def __init__(self, scratch_root: str, own_pid_namespace: bool) -> None:
        self.scratch_root = scratch_root
        self.own_pid_namespace = own_pid_namespace
        self.counter = 0

    def run_job(self, job: dict, limits: Limits) -> dict:
        if job.get("kind") not in JOB_KINDS or job.get("args_mode", "source") not in ARGS_MODES:
            return {"status": "crashed", "error": "unknown job kind %r or args_mode %r" % (job.get("kind"),
                                                                                         job.get("args_mode"))}
        scratch = self._fresh_scratch()
        cap = 2 * int(limits["max_output_bytes"]) + 65536  # JSON escaping at most doubles a repr
        read_end, write_end = os.pipe()
        started = time.monotonic()
        pid = os.fork()
        if pid == 0:
            os.close(read_end)
            child_main(job, limits, write_end, scratch)
        os.close(write_end)
        try:
            os.setpgid(pid, pid)
        except OSError:
            pass
        try:
            data, how = _collect(read_end, started + float(limits["timeout_s"]), cap)
        finally:
            os.close(read_end)
        result = _parse_result(data) if how == "eof" else None
        if result is not None:  # a complete result: no need to wait for the exit; the sweep reaps it later
            _kill_group(pid)
        else:
            status, rusage = None, None
            if how == "eof":
                status, rusage = _wait_exit(pid, started + float(limits["timeout_s"]))
                how = "timeout" if status is None else how
            _kill_group(pid)
            if status is None:
                _, status, rusage = os.wait4(pid, 0)
            result = _failure(how, data, status, rusage, limits)
        self._sweep()
        _remove(scratch)
        result.setdefault("ms", round((time.monotonic() - started) * 1000, 3))
        return result

    def _fresh_scratch(self) -> str:
        """A new empty private dir for one job; rebuilds the scratch root if a program removed or spoiled it."""
        self.counter += 1
        path = os.path.join(self.scratch_root, "t%d" % self.counter)
        try:
            os.mkdir(path, 0o700)
            return path
        except OSError:
            pass
        try:
            os.chmod(os.path.dirname(self.scratch_root), 0o755)  # a program may have chmod'ed its parent
        except OSError:
            pass
        _remove(self.scratch_root)
        os.makedirs(path, 0o700)
        return path

    def _sweep(self) -> None:
        """Nothing a job started may outlive it.

        In a private pid namespace (bubblewrap, the rootless sandbox, a container) that is everything but pid 1 and
        this worker: walked through /proc, or, without a /proc in the sandbox (bubblewrap inside a container whose
        /proc is masked cannot mount a fresh one), kill(-1), which there reaches the same set. Elsewhere (sandbox
        `none`) this worker is a child subreaper, so whatever a job double-forked was reparented to us: every child
        left is a job's, and killing them round after round (their own children come to us in turn) ends them all."""
        if self.own_pid_namespace:
            me = os.getpid()
            try:
                names = os.listdir("/proc")
            except FileNotFoundError:
                try:
                    os.kill(-1, signal.SIGKILL)
                except OSError:  # ESRCH: nothing left to kill
                    pass
                names = []
            for name in names:
                if name.isdigit() and int(name) not in (1, me):
                    try:
                        os.kill(int(name), signal.SIGKILL)
                    except OSError:
                        pass
        elif SUBREAPER:
            _kill_children(time.monotonic() + SWEEP_DEADLINE_S)
        _reap()


def _children() -> list[int]:
    """Children of this (single-threaded) worker: /proc/self/task/<pid>/children, one small read; the whole /proc
    walked only where the kernel has no such file (CONFIG_PROC_CHILDREN off)."""
    me = os.getpid()
    try:
        with open("/proc/self/task/%d/children" % me, "rb") as stream:
            return [int(pid) for pid in stream.read().split()]
    except OSError:
        pass
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open("/proc/%s/stat" % name, "rb") as stream:
                    fields = stream.read().rsplit(b")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == me and fields[0] != b"Z":
                found.append(int(name))
    return found


def _kill_children(deadline: float) -> None:
    while time.monotonic() < deadline:
        _reap()
        children = _children()
        if not children:
            return
        for pid in children:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        time.sleep(0.001)


def _reap() -> None:
    """Collect every exited child (orphans reparented to us, when the worker is pid 1 or a subreaper)."""
    while True:
        try:
            if os.waitpid(-1, os.WNOHANG)[0] == 0:
                break
        except ChildProcessError:
            break


def _remove(path: str) -> None:
    """Remove a file, link or tree the program may have chmod'ed; never follows links."""
    def retry(function, failed: str, _exc_info) -> None:
        try:
            os.chmod(os.path.dirname(failed), 0o700)
            if not os.path.islink(failed) and os.path.isdir(failed):
                os.chmod(failed, 0o700)
            function(failed)
        except OSError:
            pass

    if os.path.islink(path) or os.path.isfile(path):
        try:
            os.unlink(path)
        except OSError:
            pass
    elif os.path.isdir(path):
        try:
            os.chmod(path, 0o700)
        except OSError:
            pass
        shutil.rmtree(path, onerror=retry)


def _collect(fd: int, deadline: float, cap: int) -> tuple:
    """Read the child's result until EOF, the deadline, or more than `cap` bytes."""
    chunks: list[bytes] = []
    size = 0
    poller = select.poll()
    poller.register(fd, select.POLLIN | select.POLLHUP)
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return b"".join(chunks), "timeout"
        if not poller.poll(remaining * 1000):
            continue
        data = os.read(fd, 65536)
        if not data:
            return b"".join(chunks), "eof"
        chunks.append(data)
        size += len(data)
        if size > cap:
            return b"", "too_large"


def _wait_exit(pid: int, deadline: float) -> tuple:
    """The child's exit status once it exits by itself (it closed its pipe), or (None, None) at the deadline."""
    delay = 0.0002
    while True:
        done, status, rusage = os.wait4(pid, os.WNOHANG)
        if done:
            return status, rusage
        if time.monotonic() >= deadline:
            return None, None
        time.sleep(delay)
        delay = min(delay * 2, 0.01)


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except OSError:
        pass


def _parse_result(data: bytes):
    """The child's RESULT (its own claim about its own run, nothing more), or None when it wrote nothing usable;
    only the fields a RESULT has, each of its type, pass on."""
    try:
        claim = _loads(data.decode("utf-8", "surrogatepass"))
    except ValueError:
        return None
    if not isinstance(claim, dict) or claim.get("status") not in STATUSES:
        return None
    result = {"status": claim["status"]}
    for key, kinds in (("output", (str,)), ("error", (str,)), ("none", (bool,)), ("ms", (int, float))):
        if key in claim:
            if not isinstance(claim[key], kinds) or isinstance(claim[key], bool) and kinds != (bool,):
                return None
            result[key] = claim[key]
    return result


def _failure(how: str, data: bytes, status: int, rusage, limits: Limits) -> dict:
    """A RESULT for a child that gave no usable result: why, from the deadline, the byte cap or its exit status."""
    if how == "timeout":
        return {"status": "timeout", "error": "no result within %ss" % limits["timeout_s"]}
    if how == "too_large":
        return {"status": "output_too_large", "error": "the result exceeds the output limit"}
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        if sig == signal.SIGXCPU:
            return {"status": "timeout", "error": "CPU time limit"}
        near_limit = rusage is not None and rusage.ru_maxrss * 1024 >= 0.8 * (int(limits["memory_mb"]) << 20)
        if sig == signal.SIGKILL and near_limit:
            return {"status": "memory", "error": "killed near the memory limit"}
        try:
            name = signal.Signals(sig).name
        except ValueError:
            name = "signal %d" % sig
        return {"status": "crashed", "error": "the program died of %s" % name}
    if data:
        return {"status": "crashed", "error": "the program wrote a malformed result"}
    code = os.WEXITSTATUS(status) if os.WIFEXITED(status) else status
    return {"status": "crashed", "error": "the program exited (code %d) without a result" % code}


# ---------------------------------------------------------------- protocol loop


def handle(worker: Worker, request: dict) -> dict:
    reply = {"v": PROTOCOL_VERSION, "id": request.get("id")}
    if request.get("v") != PROTOCOL_VERSION:
        return dict(reply, ok=False, error="protocol version %r, expected %d" % (request.get("v"), PROTOCOL_VERSION))
    op = request.get("op")
    if op == "ping":
        return dict(reply, ok=True, pid=os.getpid(), uid=os.getuid(), python=sys.version.split()[0],
                    hash_seed=os.environ.get("PYTHONHASHSEED"), str_hash=hash("azr-probe"),
                    ignore_environment=sys.flags.ignore_environment, exec_denied=EXEC_FILTER is not None)
    if op == "exit":
        return dict(reply, ok=True)
    if op != "run":
        return dict(reply, ok=False, error="unknown op %r" % op)
    try:
        asked = request["limits"]
        limits: Limits = {"timeout_s": float(asked["timeout_s"]), "memory_mb": int(asked["memory_mb"]),
                          "max_output_bytes": int(asked["max_output_bytes"]),
                          "max_processes": int(asked["max_processes"])}
        jobs = list(request["jobs"])
    except (KeyError, TypeError, ValueError) as exc:
        return dict(reply, ok=False, error="bad run request: %s" % _short(exc))
    results = []
    for job in jobs:
        result = worker.run_job(job, limits)
        results.append(result)
        if request.get("stop_on_failure") and result["status"] != "ok":
            break
    return dict(reply, ok=True, results=results)


def _claim_protocol_fds() -> tuple:
    """Move the protocol to private fds so that nothing printed by accident can corrupt it."""
    proto_in, proto_out = os.dup(0), os.dup(1)
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    os.dup2(null, 1)
    os.close(null)
    return proto_in, proto_out


# execve and execveat per architecture: (AUDIT_ARCH value, syscall numbers, lowest number of a foreign ABI or None)
EXEC_SYSCALLS = {"x86_64": (0xC000003E, (59, 322), 0x40000000), "aarch64": (0xC00000B7, (221, 281), None),
                 "riscv64": (0xC00000F3, (221, 281), None), "ppc64le": (0xC0000015, (11, 362), None),
                 "s390x": (0x80000016, (11, 354), None)}
SECCOMP_RET_ALLOW, SECCOMP_RET_ERRNO, SECCOMP_RET_KILL_PROCESS = 0x7FFF0000, 0x00050000, 0x80000000
EPERM = 1


def exec_filter_program(machine: str):
    """The classic-BPF seccomp program of deny_exec as (code, jt, jf, k) tuples, or None for an unknown machine:
    another ABI than the native one kills the job (x86_64's i386 entry), the x32 numbers and execve/execveat give
    EPERM, everything else is allowed."""
    if machine not in EXEC_SYSCALLS:
        return None
    arch, numbers, foreign = EXEC_SYSCALLS[machine]
    load_word, jump_equal, jump_at_least, ret = 0x20, 0x15, 0x35, 0x06
    deny = SECCOMP_RET_ERRNO | EPERM
    program = [(load_word, 0, 0, 4), (jump_equal, 1, 0, arch), (ret, 0, 0, SECCOMP_RET_KILL_PROCESS),
               (load_word, 0, 0, 0)]
    if foreign is not None:
        program += [(jump_at_least, 0, 1, foreign), (ret, 0, 0, deny)]
    for number in numbers:
        program += [(jump_equal, 0, 1, number), (ret, 0, 0, deny)]
    return program + [(ret, 0, 0, SECCOMP_RET_ALLOW)]


def harden() -> tuple:
    """Make this worker non-dumpable (no process of its uid without CAP_SYS_PTRACE may trace it or open its
    /proc/<pid>/fd or mem: a job cannot reach the worker's protocol or memory) and a child subreaper (what a job
    double-forks comes back to us, see Worker._sweep); build the exec filter each child installs.
    Returns (subreaper, exec filter or None); without ctypes, neither."""
    try:
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
    except (ImportError, OSError):
        return False, None
    libc.prctl.argtypes = (ctypes.c_int, ctypes.c_ulong, ctypes.c_void_p, ctypes.c_ulong, ctypes.c_ulong)
    libc.prctl(PR_SET_DUMPABLE, 0, None, 0, 0)
    subreaper = libc.prctl(PR_SET_CHILD_SUBREAPER, 1, None, 0, 0) == 0
    program = exec_filter_program(os.uname().machine)
    if program is None:
        return subreaper, None

    class SockFilter(ctypes.Structure):
        _fields_ = [("code", ctypes.c_uint16), ("jt", ctypes.c_uint8), ("jf", ctypes.c_uint8),
                    ("k", ctypes.c_uint32)]

    class SockFprog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(SockFilter))]

    filters = (SockFilter * len(program))(*[SockFilter(*insn) for insn in program])
    fprog = SockFprog(len(program), filters)
    fprog._keep = filters  # the array must live as long as the program
    return subreaper, (libc, ctypes.addressof(fprog), fprog)


def main(argv: list) -> int:
    global SUBREAPER, EXEC_FILTER
    SUBREAPER, EXEC_FILTER = harden()
    scratch_base = argv[argv.index("--scratch") + 1] if "--scratch" in argv else "/tmp"
    worker = Worker(os.path.join(scratch_base, "azr-worker-%d" % os.getpid()), "--own-pid-namespace" in argv)
    os.makedirs(worker.scratch_root, 0o700, exist_ok=True)
    proto_in, proto_out = _claim_protocol_fds()
    for name in PRELOADED:  # imported once here, so each forked child finds them ready
        try:
            __import__(name)
        except ImportError:
            pass
    stream = os.fdopen(proto_in, "rb")
    try:
        for line in stream:
            try:
                request = _loads(line)
            except ValueError as exc:
                request = exc
            if isinstance(request, dict):
                try:
                    reply = handle(worker, request)
                except Exception as exc:  # our own fault (fork failed, scratch unusable): say so, then make way
                    request = {"op": "exit"}
                    reply = {"v": PROTOCOL_VERSION, "id": None, "ok": False, "fatal": True, "error": _short(exc)}
            else:
                error = _short(request) if isinstance(request, ValueError) else "request is not an object"
                request, reply = {}, {"v": PROTOCOL_VERSION, "id": None, "ok": False, "error": error}
            view = memoryview((_dumps(reply) + "\n").encode("ascii"))
            while view:
                view = view[os.write(proto_out, view):]
            if request.get("op") == "exit":
                break
    finally:
        _remove(worker.scratch_root)
    return 0


LITERAL_NAMES = _literal_names()
"""The names a literal argument list may use (what repr prints for plain data), bound before any program runs."""

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
