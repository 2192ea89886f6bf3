"""Executor fixtures: which sandbox backends the backend-parametrized tests run on, and how to build an executor.

To run those tests on another backend, add it to EXECUTOR_FACTORIES (BACKENDS follows): the `executor_backend`
fixture is parametrized over BACKENDS.
"""

from __future__ import annotations

import os
from typing import Any, Callable

import pytest

from executor_svc.executor import Executor


def _process_executor(**kwargs: Any) -> Executor:
    """The embedded backend: bubblewrap where usable (the sandbox tests insist on it, see `require_isolation`)."""
    return Executor(**kwargs)


EXECUTOR_FACTORIES: dict[str, Callable[..., Executor]] = {"process": _process_executor}
"""backend name -> factory taking Executor keyword arguments (workers, limits, recycle_after, ...)."""

BACKENDS: list[str] = list(EXECUTOR_FACTORIES)


def make_executor(backend: str, **kwargs: Any) -> Executor:
    """An executor on `backend`; the caller closes it."""
    return EXECUTOR_FACTORIES[backend](**kwargs)


@pytest.fixture(scope="module", params=BACKENDS)
def executor_backend(request: pytest.FixtureRequest) -> str:
    """The name of a sandbox backend; tests build executors with make_executor(executor_backend, ...)."""
    return str(request.param)


def require_isolation(executor: Executor) -> None:
    """Sandbox tests need real isolation: skip on a laptop without bubblewrap, fail in CI (AZR_REQUIRE_SERVICES=1)."""
    if executor.isolation == "none":
        reason = "bubblewrap is not usable here, the process sandbox runs with rlimits only"
        if os.environ.get("AZR_REQUIRE_SERVICES", "") == "1":
            pytest.fail(f"required sandbox missing (AZR_REQUIRE_SERVICES=1): {reason}")
        pytest.skip(reason)


@pytest.fixture(scope="session")
def executor_factory() -> Callable[..., Executor]:
    """make_executor, for module-scoped fixtures of the test files."""
    return make_executor


@pytest.fixture(scope="session")
def isolation_required() -> Callable[[Executor], None]:
    """require_isolation, for the test files."""
    return require_isolation
