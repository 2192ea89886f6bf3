"""Failures of the sandbox machinery itself, as opposed to a program's own status."""

from __future__ import annotations


class SandboxUnavailable(RuntimeError):
    """A worker cannot be started or does not answer its handshake: an infrastructure fault (`sandbox_error`)."""


class WorkerCrashed(RuntimeError):
    """The task killed (or hung) its worker again on a fresh worker: the program's fault (`crashed`)."""


class ExecutorClosed(SandboxUnavailable):
    """The executor was closed while the task waited or ran."""
