"""Infrastructure faults of the executor: retried once, then the work is dropped and counted, never scored.

A fault says nothing about the program or the answer: status `sandbox_error` (a worker could not start or broke its
protocol), or the port raising (an RQ job that failed after its retries or gave no result in time, a sandbox that
cannot start, a lost connection). `crashed` is not one: the executor has already re-run the task on a fresh worker,
and a program that takes that one down too (os._exit, a signal, killing its parent) is to blame for it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TypeVar

from services.execution import ExecStatus

log = logging.getLogger(__name__)
R = TypeVar("R")

INFRASTRUCTURE_ERRORS: tuple[type[BaseException], ...] = (RuntimeError, TimeoutError, OSError)
"""What executor ports raise when the infrastructure fails; a programming error (TypeError, ValueError, ...) is not
caught and stops the step."""


def is_infrastructure_fault(status: ExecStatus) -> bool:
    """A status that blames the sandbox, not the program or the answer."""
    return status is ExecStatus.SANDBOX_ERROR


def with_fault_retry(call: Callable[[], R], status_of: Callable[[R], ExecStatus], what: str) -> R | None:
    """`call()`, once more if it fails for infrastructure reasons; None when the second try fails too."""
    for attempt in (1, 2):
        try:
            result = call()
        except INFRASTRUCTURE_ERRORS as exc:
            log.warning("executor fault on %s (try %d of 2): %s: %s", what, attempt, type(exc).__name__, exc)
            continue
        if not is_infrastructure_fault(status_of(result)):
            return result
        log.warning("executor fault on %s (try %d of 2): %s", what, attempt, getattr(result, "error", ""))
    return None
