"""Fixtures the coordinator's step tests share."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from executor_svc.executor import Executor


@pytest.fixture(scope="module")
def executor() -> Iterator[Executor]:
    """A real sandbox pool of one worker for a module's steps."""
    with Executor(workers=1) as running:
        yield running
