"""AZR sandbox worker: a single-threaded fork-server that runs model-written Python, one fresh child per job.

Stdlib only and self-contained: it runs as `python3 -s -S -B worker.py [--scratch DIR] [--own-pid-namespace]` under
any python3 >= 3.9, with nothing of the project importable (bubblewrap, a Docker image, or a plain process).
Start it with a cleared environment and an explicit PYTHONHASHSEED (never `-I`: it ignores PYTHONHASHSEED).

Wire protocol, version 1: JSON lines. The worker reads one request line on stdin and writes exactly one reply line
on stdout; every message carries `"v": 1`. Program output never reaches these streams: the worker moves its protocol
to private fds at start, and each child's fds 0-2 are /dev/null.

  request  {"v": 1, "id": ID, "op": "ping"}
  reply    {"v": 1, "id": ID, "ok": true, "pid": int, "uid": int, "python": "3.11.2", "hash_seed": "0",
            "str_hash": hash("azr-probe"), "ignore_environment": 0}
  request  {"v": 1, "id": ID, "op": "run", "stop_on_failure": bool, "jobs": [JOB, ...],
            "limits": {"timeout_s": float, "memory_mb": int, "max_output_bytes": int, "max_processes": int}}
  reply    {"v": 1, "id": ID, "ok": true, "results": [RESULT, ...]}   (stops after the first failed job if asked)
  request  {"v": 1, "id": ID, "op": "exit"}          reply {"v": 1, "id": ID, "ok": true}, then the worker exits
  any bad request gets {"v": 1, "id": ID, "ok": false, "error": "..."}; an internal failure of the worker gets
  {"v": 1, "id": null, "ok": false, "fatal": true, "error": "..."} and the worker exits

  JOB is one of (program = source defining `f`; args = argument source, run as f(<args>); expected = value source):
    {"kind": "call", "program", "args"}                  -> RESULT + "output": repr(f(args)), "none": result is None
    {"kind": "equal", "answer", "expected"}               -> RESULT + "equal": eval(expected) == eval(answer)
    {"kind": "call_equal", "program", "args", "expected", "expected_scope": "program"|"pristine",
     "plain_args": bool}                                  -> RESULT + "equal": eval(expected) == f(args)
  RESULT is {"status", "error"?, "ms", ...}; status is one of ok, syntax_error, no_function, runtime_error,
  timeout, memory, output_too_large, crashed (each is also a services.execution.ExecStatus value). Comparisons add
  "compared": "value" | "text" (texts are compared when `expected` is no Python expression, e.g. `inf`).

Per job: fork; the child joins its own process group (not a new session: an unsandboxed worker's leftovers stay
findable in its session), points fds 0-2 at /dev/null, closes every other inherited fd, moves its result pipe to a
high fd, chdirs into a fresh private scratch dir, sets rlimits (AS, CPU, FSIZE, NOFILE, CORE, NPROC), then execs the
program in fresh module globals. The result starts with a per-job random nonce, so bytes written blindly into the
pipe are never taken for a result. The parent enforces the wall deadline, reads at most a capped number of bytes,
SIGKILLs the child's process group and, with --own-pid-namespace (bubblewrap, or a container where the worker is the
only process tree besides pid 1), every other process left in the sandbox.

Comparisons: `expected` is evaluated after the untrusted code ran, with the builtins as they were at start (the
program may have patched them), and a compared value may hold only plain data types plus the types the expected value
holds (a class whose __eq__ always answers True cannot pass a check). This guards against the reward hacks a model
can stumble on; code written against this file's internals (gc, ctypes, /proc/<pid>/mem) can forge its own verdict,
which is why the sandbox, not these checks, is the security boundary.
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

PROTOCOL_VERSION = 1
FILE_SIZE_LIMIT = 1 << 20  # largest file a program may write in its scratch dir
OPEN_FILES_LIMIT = 64
RESULT_FD_BASE = 200  # the child's result pipe moves here, away from the fds a blind writer tries first
PRELOADED = ("collections", "itertools", "functools", "heapq", "math", "cmath", "re", "string", "bisect", "copy",
             "operator", "fractions", "decimal", "typing", "dataclasses", "enum", "array", "textwrap",
             "unicodedata", "numbers", "keyword", "types", "abc", "contextlib")
STATUSES = ("ok", "syntax_error", "no_function", "runtime_error", "timeout", "memory", "output_too_large", "crashed")

# Captured before any program runs: a program may rebind builtins or json functions in its own child.
_repr, _type, _len, _id, _isinstance, _callable, _compile, _eval, _exec, _str, _bool = (
    repr, type, len, id, isinstance, callable, compile, eval, exec, str, bool)
_dumps, _loads = json.dumps, json.loads
PRISTINE_BUILTINS = dict(builtins.__dict__)
_dict_update, _dict_items = dict.update, dict.items
_JSON_ESCAPES = {code: "\\u%04x" % code for code in range(32)}
_JSON_ESCAPES.update({ord('"'): '\\"', ord("\\"): "\\\\"})
MEMORY_RESULT = {"status": "memory", "error": "MemoryError: the memory limit was reached"}


# ---------------------------------------------------------------- wire types: the protocol above, for type checkers
# The executor builds its requests with these (executor_svc/worker_messages.py); here they only annotate. Requests
# arrive as untrusted JSON: the worker still checks every field it reads, as the docstring says.


class CallJob(TypedDict):
    """Run `f(<args>)`; the RESULT carries `output` (its repr) and `none`."""

    kind: Literal["call"]
    program: str
    args: str


class EqualJob(TypedDict):
    """Evaluate `answer`, then `expected`, and compare; the RESULT carries `equal`."""

    kind: Literal["equal"]
    answer: str
    expected: str


class CallEqualJob(TypedDict):
    """Run `f(<args>)` and compare with `expected`, evaluated in the program's names or in none."""

    kind: Literal["call_equal"]
    program: str
    args: str
    expected: str
    expected_scope: Literal["program", "pristine"]
    plain_args: bool


class Limits(TypedDict):
    """The per-job limits of a `run` request."""

    timeout_s: float
    memory_mb: int
    max_output_bytes: int
    max_processes: int


class RunRequest(TypedDict):
    """A `run` request as the executor builds it; its worker pool adds the envelope (`v`, `id`)."""

    op: Literal["run"]
    jobs: list[CallJob | EqualJob | CallEqualJob]
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


def _parse(source: str, mode: Literal["eval"], what: str) -> ast.Expression:
    try:
        return ast.parse(source, "<%s>" % what, mode)
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        raise Outcome("syntax_error", "%s does not parse: %s" % (what, _short(exc)))


def _code(tree: ast.Expression, mode: Literal["eval"], what: str) -> types.CodeType:
    """Compile a parsed tree; compile-time errors ('return' outside a function, ...) are syntax errors too."""
    try:
        return _compile(tree, "<%s>" % what, mode, dont_inherit=True)
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        raise Outcome("syntax_error", "%s does not compile: %s" % (what, _short(exc)))


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


def _eval_args(source: str, namespace: dict) -> tuple:
    """Evaluate argument source as it would be in `f(<source>)`; returns (args, kwargs)."""
    tree = _parse("__azr_collect__(%s\n)" % source, "eval", "input")
    call = tree.body
    # narrowed by the captured `_isinstance` (a program may rebind the builtin), which mypy does not follow
    if not (_isinstance(call, ast.Call) and _isinstance(call.func, ast.Name) and call.func.id == "__azr_collect__"):  # type: ignore[attr-defined]
        raise Outcome("syntax_error", "input is not an argument list")
    code = _code(tree, "eval", "input")
    return _eval(code, namespace, {"__azr_collect__": lambda *args, **kwargs: (args, kwargs)})


def _eval_expression(source: str, namespace: dict, what: str):
    code = _compile_source(source.strip(), "eval", what)
    return _eval(code, namespace)


def _data_types() -> frozenset:
    import collections
    import decimal
    import fractions
    return frozenset((type(None), bool, int, float, complex, str, bytes, bytearray, list, tuple, dict, set,
                      frozenset, range, slice, type(Ellipsis), collections.OrderedDict, collections.defaultdict,
                      collections.Counter, collections.deque, fractions.Fraction, decimal.Decimal))


_MAPPINGS = (dict,)
_SEQUENCES = (list, tuple, set, frozenset)


def _walk(value, allowed):
    """Types met in `value` (containers opened); stops at the first type not in `allowed` (None: allow all)."""
    seen: set[int] = set()
    found: set[type] = set()
    stack = [value]
    while stack:
        item = stack.pop()
        kind = _type(item)
        if allowed is not None and kind not in allowed:
            return found, kind
        found.add(kind)
        if _id(item) in seen:
            continue
        seen.add(_id(item))
        if _isinstance(item, _MAPPINGS):
            stack.extend(dict.keys(item))
            stack.extend(dict.values(item))
        elif _isinstance(item, _SEQUENCES) or kind.__name__ == "deque":
            stack.extend(item)
        elif kind is slice:
            stack.extend((item.start, item.stop, item.step))
    return found, None


def _compare(value, expected_source: str, namespace: dict) -> dict:
    """Is `value` equal to the value `expected_source` denotes? Falls back to repr text when it does not evaluate."""
    try:
        expected = _eval_expression(expected_source, namespace, "expected value")
    except BaseException:
        return {"status": "ok", "equal": _repr(value) == expected_source.strip(), "compared": "text"}
    expected_types, _ = _walk(expected, None)
    _, foreign = _walk(value, DATA_TYPES | expected_types)
    if foreign is not None:
        return {"status": "ok", "equal": False, "error": "value holds a %s, not plain data" % foreign.__name__}
    return {"status": "ok", "equal": _bool(expected == value), "compared": "value"}


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


def _job_call(job: CallJob, limits: Limits) -> dict:
    namespace = _load_program(job["program"])
    args, kwargs = _eval_args(job["args"], namespace)
    value = namespace["f"](*args, **kwargs)
    return {"status": "ok", "output": _repr_capped(value, limits["max_output_bytes"]), "none": value is None}


def _job_equal(job: EqualJob, limits: Limits) -> dict:
    try:
        answer = _eval_expression(job["answer"], {"__builtins__": PRISTINE_BUILTINS}, "answer")
    except MemoryError:
        raise
    except BaseException:
        _restore_builtins()
        try:  # neither side evaluates (e.g. `inf`, or a repr like `defaultdict(<class 'int'>, {})`): compare texts
            _eval_expression(job["expected"], {"__builtins__": PRISTINE_BUILTINS}, "expected value")
        except BaseException:
            return {"status": "ok", "equal": job["answer"].strip() == job["expected"].strip(), "compared": "text"}
        raise
    _restore_builtins()
    return _compare(answer, job["expected"], {"__builtins__": PRISTINE_BUILTINS})


def _job_call_equal(job: CallEqualJob, limits: Limits) -> dict:
    namespace = _load_program(job["program"])
    scope = dict(namespace) if job.get("expected_scope") == "program" else {}
    scope["__builtins__"] = PRISTINE_BUILTINS
    args, kwargs = _eval_args(job["args"], namespace)
    if job.get("plain_args"):
        _, foreign = _walk((args, kwargs), ARGUMENT_TYPES)
        if foreign is not None:
            return {"status": "ok", "equal": False, "error": "input holds a %s, not plain data" % foreign.__name__}
    value = namespace["f"](*args, **kwargs)
    _restore_builtins()
    return _compare(value, job["expected"], scope)


JOB_KINDS: dict[str, Callable[[Any, Limits], dict]] = {"call": _job_call, "equal": _job_equal,
                                                      "call_equal": _job_call_equal}


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


def child_main(job: dict, limits: Limits, result_fd: int, scratch: str, nonce: bytes) -> None:
    """Runs in the forked child; never returns."""
    try:
        os.setpgid(0, 0)
        result_fd = _isolate_fds(result_fd)
        os.chdir(scratch)
        _apply_limits(limits)
        memory_payload = nonce + _encode(MEMORY_RESULT)
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
            payload = nonce + _encode(result)
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
        if job.get("kind") not in JOB_KINDS:
            return {"status": "crashed", "error": "unknown job kind %r" % job.get("kind")}
        scratch = self._fresh_scratch()
        nonce = os.urandom(8).hex().encode()
        cap = 2 * int(limits["max_output_bytes"]) + 65536  # JSON escaping at most doubles a repr
        read_end, write_end = os.pipe()
        started = time.monotonic()
        pid = os.fork()
        if pid == 0:
            os.close(read_end)
            child_main(job, limits, write_end, scratch, nonce)
        os.close(write_end)
        try:
            os.setpgid(pid, pid)
        except OSError:
            pass
        try:
            data, how = _collect(read_end, started + float(limits["timeout_s"]), cap)
        finally:
            os.close(read_end)
        result = _parse_result(data, nonce) if how == "eof" else None
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
        """In a private pid namespace, nothing but pid 1 and this worker may outlive a job.

        Without a /proc in the sandbox (bubblewrap inside a container whose /proc is masked cannot mount a fresh
        one), kill(-1) reaches the same set: every process we may signal but pid 1 and ourselves, and in a private
        pid namespace that is the namespace alone."""
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
        while True:  # orphans reparented to us (when the worker is pid 1 of a container)
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


def _parse_result(data: bytes, nonce: bytes):
    """The child's RESULT, or None when it wrote nothing usable."""
    if not data.startswith(nonce):
        return None
    try:
        result = _loads(data[len(nonce):].decode("utf-8", "surrogatepass"))
    except ValueError:
        return None
    return result if isinstance(result, dict) and result.get("status") in STATUSES else None


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
                    ignore_environment=sys.flags.ignore_environment)
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
        if request.get("stop_on_failure") and (result["status"] != "ok" or result.get("equal") is False):
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


def main(argv: list) -> int:
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


DATA_TYPES = _data_types()
"""Exact types a compared value may hold (plus the types the expected value itself holds)."""
ARGUMENT_TYPES = DATA_TYPES | {types.FunctionType, types.BuiltinFunctionType, types.MethodDescriptorType, type}
"""Exact types an answer's arguments may hold: data, and functions or classes to pass (`key=len`, a lambda)."""

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
