"""RQ job functions of the executor (queue `executor`), run by `azr worker executor`.

The worker process keeps one long-lived `Executor` (a pool of sandbox workers) for all its jobs, so it runs as an
RQ `SimpleWorker` (no fork per job). Payloads and results are JSON-ready dicts of the models in
`services/execution.py`, each carrying its schema version.
"""

from __future__ import annotations

import threading

from executor_svc.dispatch import EXECUTION_REQUEST, execute_request
from services.json_types import JsonObject
from services.ports import CodeExecutor

EXECUTOR_QUEUE = "executor"
"""Name of the RQ queue executor jobs travel on (shared by runs: executor work is stateless)."""

_executor: CodeExecutor | None = None
_executor_lock = threading.Lock()


def install_executor(executor: CodeExecutor | None) -> None:
    """Set the executor this process's jobs use (the worker command does it once at start)."""
    global _executor
    with _executor_lock:
        _executor = executor


def current_executor() -> CodeExecutor:
    """The executor `install_executor` set; RuntimeError when none was (jobs run under `azr worker executor`)."""
    with _executor_lock:
        if _executor is None:
            raise RuntimeError("no executor installed in this process: executor jobs run under `azr worker "
                               "executor`, which installs its sandbox pool at start")
        return _executor


def run_execution_job(payload: JsonObject) -> JsonObject:
    """RQ job: parse the request, run it in the sandbox, return the result as a JSON-ready dict."""
    request = EXECUTION_REQUEST.validate_python(payload)
    return execute_request(current_executor(), request).model_dump(mode="json")
