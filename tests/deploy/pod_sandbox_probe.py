"""Run inside a container shaped like the executor pod (test_executor_pod_sandbox.py): start the executor's process
backend in the sandbox mode the manifest sets, run a hostile program in one of its sandbox workers, and print one JSON
object with what happened. Stdlib only plus executor_svc (mounted read-only), like the pod's worker side.

    python3 pod_sandbox_probe.py SANDBOX_MODE REDIS_PORT SECRET

The hostile program tries what generated code must never manage: connect to Redis (the pod reaches it; the sandbox
must not), resolve a name, and find SECRET (in the pod's secret files under /run/secrets, and, as a worst case, in the
container's environment too) in its own environment, any process's /proc/<pid>/environ, or /run/secrets.
"""

from __future__ import annotations

import ast
import json
import socket
import sys

from executor_svc.errors import SandboxUnavailable
from executor_svc.process_backend import ProcessBackend
from executor_svc.worker import PROTOCOL_VERSION

HOSTILE = """
import socket

def f(port):
    found = {}
    try:
        socket.create_connection(('127.0.0.1', port), timeout=2).close()
        found['redis'] = 'connected'
    except OSError as error:
        found['redis'] = type(error).__name__
    try:
        socket.getaddrinfo('redis', 6379)
        found['dns'] = 'resolved'
    except OSError as error:
        found['dns'] = type(error).__name__
    for c in ().__class__.__base__.__subclasses__():
        if c.__name__ == '_wrap_close':
            os = c.__init__.__globals__
    texts = [repr(sorted(os['environ'].items()))]
    try:
        pids = os['listdir']('/proc')
    except OSError:
        pids = []
    for pid in pids:
        try:
            handle = os['open']('/proc/%s/environ' % pid, os['O_RDONLY'])
            texts.append(os['read'](handle, 1 << 16).decode('latin-1'))
        except (OSError, ValueError):
            pass
    try:
        for name in os['listdir']('/run/secrets'):
            handle = os['open']('/run/secrets/' + name, os['O_RDONLY'])
            texts.append(os['read'](handle, 1 << 16).decode('latin-1'))
    except OSError:
        pass
    found['texts'] = texts
    found['proc_entries'] = len(pids)
    return found
"""
LIMITS = {"timeout_s": 10, "memory_mb": 512, "max_output_bytes": 1 << 20, "max_processes": 16}


def main(argv: list[str]) -> int:
    sandbox, port, secret = argv[0], int(argv[1]), argv[2]
    report: dict[str, object] = {}
    try:
        socket.create_connection(("127.0.0.1", port), timeout=5).close()
        report["pod_reaches_redis"] = True
    except OSError as error:
        report["pod_reaches_redis"] = repr(error)
    try:
        backend = ProcessBackend(sys.executable, sandbox)  # type: ignore[arg-type]
    except SandboxUnavailable as error:
        report["refused"] = str(error)
        print(json.dumps(report))
        return 0
    report.update(isolation=backend.isolation, mount_proc=getattr(backend, "mount_proc", None))
    channel = backend(0)
    try:
        channel.send({"v": PROTOCOL_VERSION, "id": "hostile", "op": "run", "stop_on_failure": False,
                      "limits": LIMITS,
                      "jobs": [{"kind": "call", "program": HOSTILE, "args": str(port), "args_mode": "source"}]})
        (result,) = channel.receive(60.0)["results"]
    finally:
        channel.close()
        backend.close()
    found = ast.literal_eval(result["output"]) if result["status"] == "ok" else {}
    report.update(status=result["status"], error=result.get("error"), redis=found.get("redis"), dns=found.get("dns"),
                  proc_entries=found.get("proc_entries"),
                  secret_seen=any(secret in text for text in found.get("texts", [])))
    print(json.dumps(report))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
