"""Determinism (paper §3.3.3, j = 2): tricks that pass the static check are caught by re-running under another hash
seed in another process; `random`/`time` are refused statically; gold outputs do not depend on the worker."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from executor_svc.executor import GOLD_HASH_SEED, VERIFY_HASH_SEED, Executor
from executor_svc.process_backend import ProcessBackend
from executor_svc.worker import PROTOCOL_VERSION
from services.execution import ExecStatus, ExecutionLimits

SET_ORDER = "def f(x):\n    return list({'a', 'b', 'c', 'd', 'e'})"
LIMITS = ExecutionLimits(timeout_s=5.0)


@pytest.fixture(scope="module")
def executor(executor_backend: str, executor_factory: Callable[..., Executor]) -> Iterator[Executor]:
    with executor_factory(executor_backend, workers=1, limits=LIMITS) as running:
        yield running


@pytest.mark.parametrize(("name", "program"), [
    ("set_iteration_order", SET_ORDER),
    ("dict_of_set_order",
     "def f(x):\n    return {k: sorted(v) for k, v in {'k': {'x', 'y'}}.items()} | {'o': list({'p', 'q', 'r'})}"),
    ("hash_of_str", "def f(x):\n    return hash('x')"),
    ("id_of_new_object", "def f(x):\n    return id([x])"),
    ("object_repr_address", "def f(x):\n    return object()"),
    ("function_repr_address", "def f(x):\n    return f"),
    ("secrets", "import secrets\ndef f(x):\n    return secrets.randbelow(10**9)"),
    ("urandom", "import os\ndef f(x):\n    return os.urandom(4).hex()"),
    ("uuid4", "import uuid\ndef f(x):\n    return str(uuid.uuid4())"),
])
def test_nondeterminism_that_passes_the_static_check_is_caught(executor: Executor, name: str, program: str) -> None:
    result = executor.validate_proposal(program, "1")
    assert result.status is ExecStatus.NONDETERMINISTIC, result
    assert result.output is None and f"hash seed {GOLD_HASH_SEED}" in (result.error or "")


@pytest.mark.parametrize("program", [
    "import random\ndef f(x):\n    return random.random()",
    "from random import randint\ndef f(x):\n    return randint(0, 9)",
    "import time\ndef f(x):\n    return time.time()",
    "from time import perf_counter\ndef f(x):\n    return perf_counter()",
    "import datetime\ndef f(x):\n    return str(datetime.datetime.now())",
])
def test_random_and_clocks_are_forbidden_statically(executor: Executor, program: str) -> None:
    assert executor.validate_proposal(program, "1").status is ExecStatus.FORBIDDEN


def test_sorted_hash_containers_are_deterministic(executor: Executor) -> None:
    result = executor.validate_proposal("def f(x):\n    return sorted({'a', 'b', 'c', 'd', 'e'}) + [len({x, 'z'})]",
                                        "'q'")
    assert (result.status, result.output) == (ExecStatus.OK, "['a', 'b', 'c', 'd', 'e', 2]")


def run_on_fresh_worker(backend: ProcessBackend, seed: int, program: str) -> str:
    channel = backend(seed)
    try:
        channel.send({"v": PROTOCOL_VERSION, "id": 1, "op": "run", "stop_on_failure": False,
                      "jobs": [{"kind": "call", "program": program, "args": "1"}],
                      "limits": {"timeout_s": 5, "memory_mb": 512, "max_output_bytes": 65536, "max_processes": 16}})
        reply = channel.receive(30)
    finally:
        channel.close()
    assert reply["ok"] and reply["results"][0]["status"] == "ok", reply
    return reply["results"][0]["output"]


def test_gold_outputs_are_identical_on_every_seed_zero_worker() -> None:
    """Even a hash-order-dependent output is stable under seed 0 across fresh worker processes."""
    backend = ProcessBackend("/usr/bin/python3")
    try:
        gold = {run_on_fresh_worker(backend, GOLD_HASH_SEED, SET_ORDER) for _ in range(3)}
        verify = run_on_fresh_worker(backend, VERIFY_HASH_SEED, SET_ORDER)
    finally:
        backend.close()
    assert len(gold) == 1 and verify not in gold


def test_gold_outputs_do_not_depend_on_the_executor() -> None:
    programs = [("def f(x):\n    return sorted(set(x)), {c: x.count(c) for c in x}", f"'{word}'")
                for word in ("banana", "mississippi", "abracadabra")]
    with Executor(workers=2, limits=LIMITS) as first, Executor(workers=1, limits=LIMITS) as second:
        assert [r.output for r in first.validate_many(programs)] == [r.output for r in second.validate_many(programs)]
