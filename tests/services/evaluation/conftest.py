"""Evaluation tests reuse the coordinator's scripted engine (a real InferenceEngine answering scripted text).

Test directories are not packages (import mode prepend), so its directory is put on sys.path here, once, rather
than copying the engine.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from executor_svc.executor import Executor

COORDINATOR_TESTS = Path(__file__).resolve().parents[1] / "coordinator"
if str(COORDINATOR_TESTS) not in sys.path:
    sys.path.insert(0, str(COORDINATOR_TESTS))


@pytest.fixture(scope="module")
def executor() -> Iterator[Executor]:
    """The real sandboxed executor (one worker: the checks are few and the machine is shared)."""
    with Executor(workers=1) as running:
        yield running
