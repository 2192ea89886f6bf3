"""A stand-in for the `azr` process run by a normal user, for test_unprivileged_service.py (run as its own program).

Runs under Debian's python3 with only a copy of executor_svc importable, as the uid the test chose: its environment
holds the secrets an `azr` process holds, it starts one worker through the process backend in the sandbox mode
given, and runs each attack of issue 37 in it as a `call` job. Prints one JSON line with the results, then runs the
kill(-1) attack last and prints a second line if it is still alive.

    python3 -S unprivileged_service.py MODE ATTACKS_JSON          (ATTACKS_JSON: {name: program}, placeholders
                                                                   {SERVICE_PID} and {STAGED} filled in here)
"""

from __future__ import annotations

import json
import os
import sys

from executor_svc.process_backend import ProcessBackend
from executor_svc.sandbox_launch import WORKER_SOURCE
from executor_svc.worker import PROTOCOL_VERSION

LIMITS = {"timeout_s": 5, "memory_mb": 512, "max_output_bytes": 1 << 20, "max_processes": 32}
KILL_EVERYTHING = "import os, signal\ndef f(x):\n    os.kill(-1, signal.SIGKILL)\n    return 1"


def run(channel, program: str) -> dict:
    channel.send({"v": PROTOCOL_VERSION, "id": 1, "op": "run", "stop_on_failure": False, "limits": LIMITS,
                  "jobs": [{"kind": "call", "program": program, "args": "1", "args_mode": "source"}]})
    return channel.receive(60.0)["results"][0]


def main(mode: str, attacks: dict[str, str]) -> None:
    backend = ProcessBackend("/usr/bin/python3", mode)  # type: ignore[arg-type]
    channel = backend(0)
    results = {}
    for name, program in attacks.items():
        program = program.replace("{SERVICE_PID}", str(os.getpid())).replace("{STAGED}", backend.worker_file)
        results[name] = run(channel, program)
    with open(backend.worker_file, "rb") as stream:
        intact = stream.read() == WORKER_SOURCE.read_bytes()
    print(json.dumps({"isolation": backend.isolation, "uid": os.getuid(), "results": results,
                      "staged_intact": intact}), flush=True)
    try:
        outcome = run(channel, KILL_EVERYTHING)
    except Exception as exc:  # the job took its worker with it, as it may; what matters is that we are alive
        outcome = {"status": "worker lost", "error": f"{type(exc).__name__}: {exc}"}
    print(json.dumps({"survived_kill_everything": True, "results": {"kill_everything": outcome}}), flush=True)
    channel.close()
    backend.close()


if __name__ == "__main__":
    main(sys.argv[1], json.loads(sys.argv[2]))
