"""Executor side of the worker protocol: building `run` requests and reading their results (see worker.py)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from executor_svc.errors import SandboxUnavailable
from executor_svc.worker import CallJob, RunRequest
from services.execution import ExecStatus, ExecutionLimits
from services.json_types import JsonObject, JsonValue

Job = CallJob
"""One job of a `run` request, as worker.py's protocol defines it."""
ArgsMode = Literal["source", "literal", "restricted"]

WORKER_STATUSES = frozenset({"ok", "syntax_error", "no_function", "runtime_error", "timeout", "memory",
                             "output_too_large", "crashed"})
"""Statuses a worker reports for one job; each is also an ExecStatus value."""


@dataclass(frozen=True)
class JobResult:
    """What one job (one forked child) produced."""

    status: ExecStatus
    error: str | None = None
    output: str | None = None  # repr(f(args)), as the sandboxed run reports it
    none: bool = False  # the result was None
    ms: float = 0.0

    @property
    def succeeded(self) -> bool:
        return self.status is ExecStatus.OK

    @classmethod
    def from_wire(cls, raw: JsonValue) -> JobResult:
        if not isinstance(raw, dict) or raw.get("status") not in WORKER_STATUSES:
            raise SandboxUnavailable(f"malformed job result from the worker: {str(raw)[:200]}")
        output = raw.get("output")
        if output is not None and not isinstance(output, str):
            raise SandboxUnavailable(f"malformed output from the worker: {str(raw)[:200]}")
        try:
            ms = float(raw.get("ms") or 0.0)
        except (TypeError, ValueError):
            raise SandboxUnavailable(f"malformed job result from the worker: {str(raw)[:200]}") from None
        return cls(status=ExecStatus(raw["status"]), error=str(raw["error"]) if raw.get("error") else None,
                   output=output, none=bool(raw.get("none")), ms=ms)


def call_job(program: str, args: str, args_mode: ArgsMode = "source") -> CallJob:
    """Run `f(<args>)`; the result is its repr. `args_mode`: how the arguments become values (worker.py)."""
    return {"kind": "call", "program": program, "args": args, "args_mode": args_mode}


def run_message(jobs: Sequence[Job], limits: ExecutionLimits, stop_on_failure: bool) -> RunRequest:
    """A `run` request (the pool adds `v` and `id`)."""
    return {"op": "run", "jobs": list(jobs), "stop_on_failure": stop_on_failure,
            "limits": {"timeout_s": limits.timeout_s, "memory_mb": limits.memory_mb,
                       "max_output_bytes": limits.max_output_bytes, "max_processes": limits.max_processes}}


def reply_timeout_s(limits: ExecutionLimits, jobs: int) -> float:
    """How long a worker may take for `jobs` jobs before it counts as hung (each job is bounded by its deadline)."""
    return jobs * (limits.timeout_s + 1.0) + 5.0


def read_results(reply: JsonObject, jobs: int, stop_on_failure: bool) -> list[JobResult]:
    """The job results of a `run` reply, checked against what was asked."""
    raw = reply.get("results")
    if not isinstance(raw, list) or not raw or len(raw) > jobs:
        raise SandboxUnavailable(f"the worker answered {str(raw)[:200]} to {jobs} job(s)")
    results = [JobResult.from_wire(item) for item in raw]
    if len(results) < jobs and not (stop_on_failure and not results[-1].succeeded):
        raise SandboxUnavailable(f"the worker ran {len(results)} of {jobs} jobs")
    return results
