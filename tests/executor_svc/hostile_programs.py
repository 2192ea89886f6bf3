"""A corpus of hostile proposals for the sandbox tests (test_executor_hostile.py).

Each entry is a program and an input for validate_proposal, the statuses it may end with ("ok" only where the
program is harmless inside the sandbox), the output it must give when it ends `ok` (where that tells contained from
not), and whether it takes its worker down. Placeholders filled in by the test:
{CANARY} an existing host file (world-readable and -writable) that must stay unchanged and unread, {NEWFILE} a host
path that must never appear, {PORT} a host TCP port listening on 127.0.0.1 that must never see a connection,
{SERVICE_PID} the pid of the process running the executor (whose environment holds a secret), {STAGED} the staged
worker.py that later workers run, {MARKER} a word in the command line of another process on the host.
The entries marked "issue 37" are the attacks that succeeded before, when `auto` fell back to no sandbox.
Many programs reach `os`, files or processes through routes the static check allows (os.open, pathlib, ctypes,
the subclasses gadget) on purpose: those test the sandbox itself, not the check.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Hostile:
    name: str
    program: str
    expect: frozenset[str]
    input: str = "1"
    kills_worker: bool = False
    output: str | None = None  # when the status is ok, the output must be this


def _h(name: str, program: str, *expect: str, input: str = "1", kills_worker: bool = False,
       output: str | None = None) -> Hostile:
    return Hostile(name, program, frozenset(expect), input, kills_worker, output)


GADGET = (
    "def _os():\n"
    "    for c in ().__class__.__base__.__subclasses__():\n"
    "        if c.__name__ == '_wrap_close':\n"
    "            return c.__init__.__globals__\n"
)

CORPUS: list[Hostile] = [
    # --- processes --------------------------------------------------------------------------------------------------
    _h("fork_bomb", "import os\ndef f(x):\n    while True:\n        os.fork()",  # every copy writes a result
       "runtime_error", "crashed", "timeout", "memory", "output_too_large"),
    _h("fork_bomb_children_sleep", "import os, select\ndef f(x):\n    while True:\n        if os.fork() == 0:\n"
       "            select.select([], [], [], 1000)", "runtime_error", "crashed", "timeout", "memory"),
    _h("os_system", "import os\ndef f(x):\n    return os.system('echo pwned > {CANARY}; touch {NEWFILE}')", "ok"),
    _h("subprocess_import", "import subprocess\ndef f(x):\n    return subprocess.run(['id']).returncode",
       "forbidden"),
    _h("posix_spawn", "import os\ndef f(x):\n    pid = os.posix_spawn('/bin/sh', ['sh', '-c', 'touch {NEWFILE}'], {})\n"
       "    return os.waitpid(pid, 0)[1]", "ok", "runtime_error"),
    _h("exec_replaces_child", "import os\ndef f(x):\n    os.execv('/bin/sh', ['sh', '-c', 'touch {NEWFILE}'])",
       "runtime_error"),  # exec is refused (EPERM), so the child stays itself and reports the error
    _h("setsid_daemon_keeps_pipe", "import os, select\ndef f(x):\n    if os.fork() == 0:\n        os.setsid()\n"
       "        select.select([], [], [], 1000)\n    return 1", "timeout", "crashed"),
    _h("setsid_daemon_closes_fds", "import os, select\ndef f(x):\n    if os.fork() == 0:\n        os.setsid()\n"
       "        os.closerange(3, 4096)\n        select.select([], [], [], 1000)\n        os._exit(0)\n    return 1",
       "ok", "crashed"),
    _h("threads", "import _thread\ndef spin():\n    while True:\n        pass\n"
       "def f(x):\n    for _ in range(500):\n        _thread.start_new_thread(spin, ())\n    return 1",
       "ok", "runtime_error", "timeout"),
    _h("threading_import", "import threading\ndef f(x):\n    return threading.active_count()", "forbidden"),
    # --- signals and the worker itself ------------------------------------------------------------------------------
    _h("kill_parent", "import os, signal\ndef f(x):\n    os.kill(os.getppid(), signal.SIGKILL)\n    return 1",
       "crashed", kills_worker=True),
    _h("kill_everything", "import os, signal\ndef f(x):\n    os.kill(-1, signal.SIGKILL)\n    return 1",
       "crashed", kills_worker=True),
    _h("killpg_worker", "import os, signal\ndef f(x):\n    os.killpg(os.getpgid(os.getppid()), signal.SIGKILL)\n"
       "    return 1", "crashed", kills_worker=True),
    _h("os_exit", "import os\ndef f(x):\n    os._exit(0)", "crashed"),
    _h("system_exit", "def f(x):\n    raise SystemExit(0)", "runtime_error"),
    _h("ignore_signals_and_spin", "import signal\ndef f(x):\n    signal.signal(signal.SIGALRM, signal.SIG_IGN)\n"
       "    signal.signal(signal.SIGTERM, signal.SIG_IGN)\n    while True:\n        pass", "timeout"),
    _h("self_sigsegv", "import os, signal\ndef f(x):\n    os.kill(os.getpid(), signal.SIGSEGV)", "crashed"),
    # --- files ------------------------------------------------------------------------------------------------------
    _h("open_builtin", "def f(x):\n    return open('{CANARY}').read()", "forbidden"),
    _h("overwrite_canary", "import os\ndef f(x):\n    fd = os.open('{CANARY}', os.O_WRONLY | os.O_TRUNC)\n"
       "    os.write(fd, b'pwned')\n    return 1", "runtime_error"),
    _h("delete_canary", "import os\ndef f(x):\n    os.remove('{CANARY}')\n    return 1", "runtime_error"),
    _h("create_host_file", "import pathlib\ndef f(x):\n    pathlib.Path('{NEWFILE}').write_text('pwned')\n"
       "    return 1", "runtime_error"),
    _h("scratch_write_is_private", "import pathlib\ndef f(x):\n    pathlib.Path('note.txt').write_text('hi')\n"
       "    return pathlib.Path('note.txt').read_text()", "ok"),
    _h("rmtree_everything", "import shutil\ndef f(x):\n"
       "    for top in ('/tmp', '/azr', '/work', '/root', '/usr/lib/python3.11/json'):\n"
       "        shutil.rmtree(top, ignore_errors=True)\n    return 1", "ok"),
    _h("spoil_scratch_root", "import os\ndef f(x):\n    root = os.getcwd().rsplit('/', 1)[0]\n    os.chdir('/')\n"
       "    os.system('rm -rf %s; echo > %s' % (root, root))\n    os.chmod(root.rsplit('/', 1)[0] or '/', 0)\n"
       "    return 1", "ok"),
    _h("file_size_limit", "import os\ndef f(x):\n    fd = os.open('big', os.O_WRONLY | os.O_CREAT)\n    written = 0\n"
       "    while written < 4 << 20:\n        written += os.write(fd, b'x' * 65536)\n    return written",
       "runtime_error"),
    _h("fill_scratch_tmpfs", "import os\ndef f(x):\n    i = 0\n    while True:\n"
       "        fd = os.open('junk%d' % i, os.O_WRONLY | os.O_CREAT)\n        os.write(fd, b'x' * (1 << 20))\n"
       "        os.close(fd)\n        i += 1", "runtime_error", "timeout"),
    _h("fill_sandbox_root", "import os\ndef f(x):\n"
       "    for name in ('/junk', '/dev/junk', '/dev/shm/junk', '/usr/junk'):\n"
       "        fd = os.open(name, os.O_WRONLY | os.O_CREAT)\n        os.write(fd, b'x')\n    return 1",
       "runtime_error"),
    _h("read_shadow", "import os\ndef f(x):\n    return os.read(os.open('/etc/shadow', os.O_RDONLY), 100)",
       "runtime_error"),
    _h("read_ssh_keys", "import os\ndef f(x):\n    return os.listdir('/root/.ssh')", "runtime_error"),
    _h("host_root_hidden", "import os\ndef f(x):\n"
       "    return sorted(set(os.listdir('/')) & {'work', 'root', 'etc', 'home'})", "ok"),
    _h("write_proc", "import os\ndef f(x):\n    fd = os.open('/proc/sys/kernel/hostname', os.O_WRONLY)\n"
       "    return os.write(fd, b'pwned')", "runtime_error"),
    _h("write_proc_self_mem", "import os\ndef f(x):\n    fd = os.open('/proc/self/mem', os.O_RDWR)\n"
       "    os.lseek(fd, id(x), 0)\n    return os.write(fd, b'\\x00' * 64)", "runtime_error", "crashed", "ok",
       "nondeterministic"),
    # --- network ----------------------------------------------------------------------------------------------------
    _h("socket_to_host", "import socket\ndef f(x):\n"
       "    s = socket.create_connection(('127.0.0.1', {PORT}), timeout=1)\n"
       "    s.sendall(b'pwned')\n    return 1", "runtime_error"),
    _h("dns_lookup", "import socket\ndef f(x):\n    return socket.getaddrinfo('example.com', 80)", "runtime_error"),
    # --- environment ------------------------------------------------------------------------------------------------
    _h("env_via_gadget", GADGET + "def f(x):\n    return sorted(_os()['environ'].items())", "ok", "nondeterministic"),
    _h("env_via_getenv", "import os\ndef f(x):\n    return str(os.getenv('AZR_TEST_SECRET'))", "ok"),
    _h("env_of_every_process", "import os\ndef f(x):\n    seen = []\n    for pid in os.listdir('/proc'):\n"
       "        try:\n            fd = os.open('/proc/%s/environ' % pid, os.O_RDONLY)\n"
       "            seen.append(os.read(fd, 65536))\n            os.close(fd)\n"
       "        except (OSError, ValueError):\n            pass\n    return b'|'.join(seen)", "ok", "nondeterministic"),
    _h("os_environ", "import os\ndef f(x):\n    return dict(os.environ)", "forbidden"),
    _h("gadget_system", GADGET + "def f(x):\n    return _os()['system']('touch {NEWFILE}')", "ok"),
    # --- issue 37: what succeeded unconfined -----------------------------------------------------------------------
    _h("read_host_file", "import os\ndef f(x):\n    return os.read(os.open('{CANARY}', os.O_RDONLY), 100)",
       "runtime_error"),
    _h("list_host_cmdlines", "import os\ndef f(x):\n    seen = []\n    for pid in os.listdir('/proc'):\n"
       "        try:\n            fd = os.open('/proc/%s/cmdline' % pid, os.O_RDONLY)\n"
       "            seen.append(os.read(fd, 4096))\n            os.close(fd)\n"
       "        except (OSError, ValueError):\n            pass\n    return b'|'.join(sorted(seen))",
       "ok", "nondeterministic", "runtime_error"),
    _h("read_service_environ", "import os\ndef f(x):\n"
       "    return os.read(os.open('/proc/{SERVICE_PID}/environ', os.O_RDONLY), 1 << 16)", "runtime_error"),
    _h("rewrite_staged_worker", "import os\ndef f(x):\n"
       "    fd = os.open('{STAGED}', os.O_WRONLY | os.O_TRUNC)\n    return os.write(fd, b'pwned = 1')",
       "runtime_error"),
    _h("run_id_via_gadget", GADGET + "def f(x):\n"
       "    return _os()['waitstatus_to_exitcode'](_os()['system']('/usr/bin/id > /dev/null'))", "ok", output="127"),
    _h("double_fork_writes_later", "import os, select\ndef f(x):\n    if os.fork() == 0:\n        os.setsid()\n"
       "        if os.fork() == 0:\n            os.closerange(3, 4096)\n            select.select([], [], [], 1.5)\n"
       "            os.close(os.open('{NEWFILE}', os.O_WRONLY | os.O_CREAT))\n        os._exit(0)\n    return 1",
       "ok", output="1"),
    # --- interpreter state ------------------------------------------------------------------------------------------
    _h("poison_builtins", "import builtins\ndef f(x):\n    builtins.sorted = lambda *a, **k: ['pwned']\n"
       "    return sorted([3, 1, 2])", "ok"),
    _h("poison_module", "import collections\ndef f(x):\n    collections.Counter = None\n    return 1", "ok"),
    _h("low_recursion_limit", "import sys\ndef f(x):\n    sys.setrecursionlimit(30)\n    return x", "ok"),
    _h("ctypes_segfault", "import ctypes\ndef f(x):\n    return ctypes.string_at(0)", "crashed"),
    _h("ctypes_system", "import ctypes\ndef f(x):\n    return ctypes.CDLL(None).system(b'touch {NEWFILE}')", "ok"),
    _h("dynamic_import", "def f(x):\n    return __import__('os').getcwd()", "forbidden"),
    _h("eval_hidden_import", "def f(x):\n    return eval(\"__import__('os').getpid()\")", "forbidden"),
    # --- resources --------------------------------------------------------------------------------------------------
    _h("infinite_loop", "def f(x):\n    while True:\n        pass", "timeout"),
    _h("sleep_past_deadline", "import select\ndef f(x):\n    select.select([], [], [], 100)\n    return 1", "timeout"),
    _h("allocate_50gb", "def f(x):\n    return bytearray(50 * 10**9)", "memory"),
    _h("giant_list", "def f(x):\n    return [0] * (10 ** 10)", "memory"),
    _h("growing_list", "def f(x):\n    a = []\n    while True:\n        a.append('x' * 10000)", "memory", "timeout"),
    _h("billion_char_output", "def f(x):\n    return 'x' * 10**9", "memory", "output_too_large"),
    _h("megabyte_output", "def f(x):\n    return 'x' * 10**6", "output_too_large"),
    _h("huge_int_exponent", "def f(x):\n    return 2 ** (10 ** 10)", "memory", "timeout"),
    _h("huge_int_repr", "def f(x):\n    return 10 ** 5000", "runtime_error", "output_too_large", "ok"),
    _h("recursion_1e6", "def f(x):\n    return x if x >= 10**6 else f(x + 1)", "runtime_error", input="0"),
    _h("recursion_1e6_raised_limit", "import sys\nsys.setrecursionlimit(10**7)\n"
       "def f(x):\n    return x if x >= 10**6 else f(x + 1)", "ok", "crashed", "runtime_error", "memory", input="0"),
    _h("huge_input", "def f(x):\n    return len(x)", "memory", input="'x' * 10**10"),
    # --- the protocol -----------------------------------------------------------------------------------------------
    _h("close_std_fds", "import os\ndef f(x):\n    os.close(0)\n    os.close(1)\n    os.close(2)\n    return 1", "ok"),
    _h("close_every_fd", "import os\ndef f(x):\n    os.closerange(0, 4096)\n    return 1", "crashed"),
    _h("print_fake_replies", "import sys\ndef f(x):\n"
       "    print('{\"v\": 1, \"id\": 1, \"ok\": true, \"results\": [{\"status\": \"ok\", \"output\": \"666\"}]}')\n"
       "    sys.stderr.write('\\n{\"garbage\"\\n' * 1000)\n    print('\\x00' * 100000)\n    return 7", "ok"),
    _h("blind_fd_writes", "import os\ndef f(x):\n    for fd in range(3, 1024):\n        try:\n"
       "            os.write(fd, b'{\"status\": \"ok\", \"output\": \"666\"}\\n')\n        except OSError:\n"
       "            pass\n    return 7", "ok", "crashed"),
    _h("read_stdin", "import sys\ndef f(x):\n    return sys.stdin.read()", "ok"),
    # --- results ----------------------------------------------------------------------------------------------------
    _h("generator", "def f(x):\n    yield x", "nondeterministic"),
    _h("repr_raises", "class A:\n    def __repr__(self):\n        raise ValueError('no repr')\n"
       "def f(x):\n    return A()", "runtime_error"),
    _h("repr_loops", "class A:\n    def __repr__(self):\n        while True:\n            pass\n"
       "def f(x):\n    return A()", "timeout"),
    _h("recursive_structure", "def f(x):\n    a = [x]\n    a.append(a)\n    return a", "ok"),
    _h("secrets_random", "import secrets\ndef f(x):\n    return secrets.token_hex(8)", "nondeterministic"),
    _h("urandom", "import os\ndef f(x):\n    return os.urandom(8)", "nondeterministic"),
    _h("random_import", "import random\ndef f(x):\n    return random.random()", "forbidden"),
    _h("time_import", "import time\ndef f(x):\n    return time.time()", "forbidden"),
]
