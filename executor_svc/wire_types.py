"""The JSON the host side of the sandbox exchanges with its workers, named as services/json_types.py names it.

The process backend's half of executor_svc (channels, worker pool) runs with the standard library only: the sandbox
images and the unprivileged executor service carry executor_svc alone, so it cannot import services/.
"""

from __future__ import annotations

from typing import Any

JsonValue = Any
"""A value of a JSON message as `json.loads` gives it; the code reading one checks what it holds."""

JsonObject = dict[str, JsonValue]
"""One JSON message between the host and a sandbox worker (a job, a reply, a status line)."""
