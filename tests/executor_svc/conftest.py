"""Executor fixtures: which sandbox backends the backend-parametrized tests run on, and how to build an executor.

To run those tests on another backend, add it to EXECUTOR_FACTORIES (BACKENDS follows): the `executor_backend`
fixture is parametrized over BACKENDS: the process backend in bubblewrap, in the rootless namespace sandbox, and the
docker backend. Each skips with its reason where it cannot run (and fails in CI, AZR_REQUIRE_SERVICES=1).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import pytest

from executor_svc.docker_backend import DockerBackend
from executor_svc.errors import SandboxUnavailable
from executor_svc.executor import Executor
from services.execution import ExecutionLimits

DOCKER_IMAGE = os.environ.get("AZR_EXECUTOR_IMAGE", "azr-executor:1")
"""The image the docker-backend tests run (build it with `make executor-image`)."""


def _required(reason: str) -> None:
    """Skip for `reason` on a laptop, fail in CI (AZR_REQUIRE_SERVICES=1)."""
    if os.environ.get("AZR_REQUIRE_SERVICES", "") == "1":
        pytest.fail(f"required sandbox missing (AZR_REQUIRE_SERVICES=1): {reason}")
    pytest.skip(reason)


def _sandboxed_executor(sandbox: str, missing: str) -> Callable[..., Executor]:
    def build(**kwargs: Any) -> Executor:
        try:
            return Executor(sandbox=sandbox, **kwargs)  # type: ignore[arg-type]
        except SandboxUnavailable as exc:
            _required(f"{missing}: {exc}")
            raise

    return build


_bwrap_executor = _sandboxed_executor("bwrap", "bubblewrap is not usable here")
"""The embedded backend in bubblewrap (CI and most installs)."""
_rootless_executor = _sandboxed_executor("rootless", "the rootless sandbox cannot run here")
"""The embedded backend in the rootless namespace sandbox (a newcomer's machine without bubblewrap)."""


def docker_backend(limits: ExecutionLimits | None = None, **kwargs: Any) -> DockerBackend:
    """A docker channel factory for `limits`; skips on a laptop without Docker (or the image), fails in CI."""
    limits = limits or ExecutionLimits()
    try:
        return DockerBackend(DOCKER_IMAGE, memory_mb=limits.memory_mb, max_processes=limits.max_processes, **kwargs)
    except SandboxUnavailable as exc:
        reason = f"the docker backend cannot run here: {exc}"
        if os.environ.get("AZR_REQUIRE_SERVICES", "") == "1":
            pytest.fail(f"required service missing (AZR_REQUIRE_SERVICES=1): {reason}")
        pytest.skip(reason)


def _docker_executor(**kwargs: Any) -> Executor:
    """The docker backend: hardened long-lived containers running the same worker (the executor owns the factory)."""
    return Executor(channel_factory=docker_backend(kwargs.get("limits")), **kwargs)


EXECUTOR_FACTORIES: dict[str, Callable[..., Executor]] = {"bwrap": _bwrap_executor, "rootless": _rootless_executor,
                                                           "docker": _docker_executor}
"""backend name -> factory taking Executor keyword arguments (workers, limits, recycle_after, ...)."""

BACKENDS: list[str] = list(EXECUTOR_FACTORIES)


def make_executor(backend: str, **kwargs: Any) -> Executor:
    """An executor on `backend`; the caller closes it."""
    return EXECUTOR_FACTORIES[backend](**kwargs)


@pytest.fixture(scope="module", params=BACKENDS)
def executor_backend(request: pytest.FixtureRequest) -> str:
    """The name of a sandbox backend; tests build executors with make_executor(executor_backend, ...)."""
    return str(request.param)


def require_isolation(executor: Executor, needed_for: str = "") -> None:
    """Sandbox tests need real isolation: an unsandboxed executor (only ever built on purpose) is refused, skipped on a
    laptop and failed in CI. `needed_for` says what the test checks that rlimits alone cannot give."""
    if executor.isolation == "none":
        _required("the executor runs unsandboxed (executor_sandbox = none)" + (f": {needed_for}" if needed_for else ""))


@pytest.fixture(scope="session")
def docker_available() -> Callable[..., DockerBackend]:
    """docker_backend: a factory of docker channel factories, skipping (or failing in CI) without an engine."""
    docker_backend().close()  # probe once: engine up and image present
    return docker_backend


@pytest.fixture(scope="session")
def executor_factory() -> Callable[..., Executor]:
    """make_executor, for module-scoped fixtures of the test files."""
    return make_executor


@pytest.fixture(scope="session")
def isolation_required() -> Callable[..., None]:
    """require_isolation, for the test files."""
    return require_isolation
