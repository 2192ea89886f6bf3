"""While an unsandboxed executor is open in this process, every log line of the process says so.

`executor_sandbox = "none"` runs model-written programs with rlimits only: they can read the host's files, reach its
network and services, and see its processes. That is only ever the user's explicit choice, and it must not scroll out
of sight: each record logged anywhere in the process (ours, uvicorn's, a library's) ends with `UNCONFINED_TAG` for as
long as such an executor is open. Done with a log record factory, so it holds whatever handlers and formatters the
process configured. Limit: text a program prints itself, or a log written by another process, is not tagged.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

UNCONFINED_TAG = " [executor_sandbox=none: model-written code runs UNCONFINED, not isolated]"
NOT_ISOLATED = ("not isolated: executor_sandbox = none runs model-written code unconfined (no bubblewrap or rootless "
                "namespaces); docs/isolation.md")
"""What /readyz and the startup line say about an unsandboxed executor."""

_lock = threading.Lock()
_open = 0
_previous: Any = None


def _tagging_factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
    record: logging.LogRecord = _previous(*args, **kwargs)
    if _open:  # the tag holds no %, so `msg % args` formats as before
        record.msg = f"{record.msg}{UNCONFINED_TAG}"
    return record


def unconfined_opened() -> None:
    """An unsandboxed executor starts: tag every record from now on."""
    global _open, _previous
    with _lock:
        if _open == 0 and _previous is None:
            _previous = logging.getLogRecordFactory()
            logging.setLogRecordFactory(_tagging_factory)
        _open += 1


def unconfined_closed() -> None:
    """One unsandboxed executor closed; the tag stays while another is open."""
    global _open
    with _lock:
        _open = max(0, _open - 1)


def unconfined_open() -> bool:
    """Whether an unsandboxed executor is open in this process."""
    return _open > 0
