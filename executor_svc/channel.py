"""The transport between the executor and one long-lived sandbox worker: JSON lines, one request, one reply.

Both backends speak it: the `process` backend over a child's stdin/stdout pipes, the `docker` backend over a
container's attached stdin/stdout. The worker program is the same in both (stdlib only, so it runs under any
python3 in any image).
"""

from __future__ import annotations

import json
from typing import Protocol

from executor_svc.wire_types import JsonObject


class WorkerLost(Exception):
    """The worker died, closed its stream, or broke the protocol; the caller recycles it and retries the task."""


class ReplyTimeout(Exception):
    """No reply within the deadline; the caller kills and recycles the worker."""


class WorkerChannel(Protocol):
    """One live worker. Not thread-safe: one request in flight at a time."""

    def send(self, message: JsonObject) -> None:
        """Write one JSON line. Raises WorkerLost if the worker is gone."""

    def receive(self, timeout_s: float) -> JsonObject:
        """Read one JSON line. Raises ReplyTimeout after timeout_s, WorkerLost on EOF or garbage."""

    def alive(self) -> bool:
        """Whether the worker process/container is still running."""

    def close(self) -> None:
        """Stop the worker and free its resources (kill the process group / remove the container). Idempotent."""


def take_reply(buffer: bytearray) -> JsonObject:
    """Remove the first JSON line from `buffer` (which holds a newline) and return it as the worker's reply.

    Raises WorkerLost when the line is not a JSON object: the worker broke the protocol.
    """
    line, _, rest = bytes(buffer).partition(b"\n")
    buffer[:] = rest
    try:
        reply = json.loads(line)
    except ValueError as exc:
        raise WorkerLost(f"the worker wrote a line that is not JSON: {line[:200]!r}") from exc
    if not isinstance(reply, dict):
        raise WorkerLost("the worker's reply is not an object")
    return reply
