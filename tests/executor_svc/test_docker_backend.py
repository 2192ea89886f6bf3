"""The docker backend's own guarantees (the shared contract suite runs on it through EXECUTOR_FACTORIES): hardening
really applied to each container, recycling, a container killed from outside, no container left behind, and gold
outputs equal to the process backend's."""

from __future__ import annotations

import os
import socket
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from executor_svc.docker_backend import (
    LABEL,
    MEMORY_HEADROOM_MB,
    OWNER_LABEL,
    PIDS_HEADROOM,
    SANDBOX_GID,
    SANDBOX_UID_BASE,
    DockerBackend,
)
from executor_svc.docker_channel import DockerWorkerChannel
from executor_svc.errors import SandboxUnavailable
from executor_svc.executor import GOLD_HASH_SEED, VERIFY_HASH_SEED, Executor
from executor_svc.worker import PROTOCOL_VERSION
from services.execution import ExecStatus, ExecutionLimits
from services.settings import Settings

pytestmark = pytest.mark.docker

LIMITS = ExecutionLimits(timeout_s=3.0, memory_mb=384, max_processes=24)
DOUBLE = ("def f(x):\n    return x * 2", "21", "42")
SLEEP_THEN_ECHO = "import select\ndef f(x):\n    select.select([], [], [], 1.5)\n    return x"
SET_ORDER = "def f(x):\n    return list({'apple', 'banana', 'cherry', 'date', x})"


class RecordingBackend:
    """A DockerBackend that remembers which container it started for which hash seed (the executor closes it)."""

    isolation = "docker"

    def __init__(self, backend: DockerBackend) -> None:
        self.backend = backend
        self.started: list[tuple[int, str]] = []

    def __call__(self, hash_seed: int) -> DockerWorkerChannel:
        channel = self.backend(hash_seed)
        self.started.append((hash_seed, channel.container_id))
        return channel

    def containers(self, hash_seed: int) -> list[str]:
        return [container for seed, container in self.started if seed == hash_seed]

    def close(self) -> None:
        self.backend.close()


def inspect(backend: DockerBackend, container_id: str) -> dict[str, Any]:
    return backend._client.api.inspect_container(container_id)


def owned_containers(backend: DockerBackend) -> list[dict[str, Any]]:
    """Every container of this backend the engine still knows, fetched with a fresh client (the backend's is closed
    once its executor is)."""
    from executor_svc.docker_backend import docker_client

    client = docker_client()
    try:
        return client.api.containers(all=True, filters={"label": f"{OWNER_LABEL}={backend.owner}"})
    finally:
        client.close()


def wait_until_gone(backend: DockerBackend, deadline_s: float = 15.0) -> list[dict[str, Any]]:
    """The backend's containers still present after up to `deadline_s` (auto-remove finishes asynchronously)."""
    deadline = time.monotonic() + deadline_s
    while (left := owned_containers(backend)) and time.monotonic() < deadline:
        time.sleep(0.2)
    return left


@pytest.fixture(scope="module")
def recorded(docker_available: Callable[..., DockerBackend]) -> Iterator[tuple[Executor, RecordingBackend]]:
    recording = RecordingBackend(docker_available(LIMITS))
    executor = Executor(channel_factory=recording, workers=1, limits=LIMITS)
    try:
        yield executor, recording
    finally:
        executor.close()


def test_containers_are_hardened(recorded: tuple[Executor, RecordingBackend]) -> None:
    executor, recording = recorded
    assert executor.validate_proposal(*DOUBLE[:2]).output == DOUBLE[2]
    users = set()
    for seed in (GOLD_HASH_SEED, VERIFY_HASH_SEED):
        info = inspect(recording.backend, recording.containers(seed)[-1])
        host, config = info["HostConfig"], info["Config"]
        assert info["State"]["Running"] and host["NetworkMode"] == "none" and config["NetworkDisabled"]
        assert host["ReadonlyRootfs"] is True and host["CapDrop"] == ["ALL"] and host["Privileged"] is False
        assert "no-new-privileges" in host["SecurityOpt"]
        assert host["PidsLimit"] == LIMITS.max_processes + PIDS_HEADROOM
        assert host["Memory"] == host["MemorySwap"] == (LIMITS.memory_mb + MEMORY_HEADROOM_MB) << 20
        assert host["NanoCpus"] == 10**9 and host["IpcMode"] == "none"
        assert "/tmp" in host["Tmpfs"] and "noexec" in host["Tmpfs"]["/tmp"] and "size=64m" in host["Tmpfs"]["/tmp"]
        assert [(u["Name"], u["Hard"]) for u in host["Ulimits"]] == [("nofile", 1024)]
        uid, gid = config["User"].split(":")
        assert int(uid) >= SANDBOX_UID_BASE and int(gid) == SANDBOX_GID
        users.add(uid)
        assert config["Labels"][LABEL] == "1" and config["Labels"][OWNER_LABEL] == recording.backend.owner
        env = dict(item.split("=", 1) for item in config["Env"])
        assert env["PYTHONHASHSEED"] == str(seed)
        assert not set(env) & {"HOME", "AZR_TEST_SECRET", "DOCKER_HOST"} and not set(env) - {
            "PYTHONHASHSEED", "PYTHONUTF8", "PYTHONDONTWRITEBYTECODE", "PATH", "HOSTNAME"}
    assert len(users) == 2  # one uid per container: RLIMIT_NPROC never counts another container's processes


def test_programs_see_the_sandbox_from_inside(recorded: tuple[Executor, RecordingBackend]) -> None:
    executor, _ = recorded
    program = ("import os, socket\ndef f(x):\n    s = socket.socket()\n    s.settimeout(1)\n"
               "    try:\n        s.connect(('1.1.1.1', 53))\n        net = 'open'\n    except OSError as e:\n"
               "        net = type(e).__name__\n    try:\n        os.open('/usr/pwned', os.O_CREAT | os.O_WRONLY)\n"
               "        root = 'writable'\n    except OSError as e:\n        root = e.errno\n"
               f"    return [os.getuid() >= {SANDBOX_UID_BASE}, os.getgid(), os.getcwd().startswith('/tmp/'),"
               " net, root]")
    result = executor.validate_proposal(program, "1")
    assert result.status is ExecStatus.OK, result
    assert result.output == f"[True, {SANDBOX_GID}, True, 'OSError', 30]"  # ENETUNREACH; EROFS = 30


def test_each_container_has_its_own_uid_so_uid_probes_are_nondeterministic(
        recorded: tuple[Executor, RecordingBackend]) -> None:
    """The price of one uid per container (see docker_backend): a program that returns its uid has no stable gold
    output, and the determinism check says so instead of storing one container's uid as the truth."""
    result = recorded[0].validate_proposal("import os\ndef f(x):\n    return os.getuid()", "1")
    assert result.status is ExecStatus.NONDETERMINISTIC, result


def test_a_container_killed_from_outside_mid_task_is_replaced_and_the_task_retried(
        recorded: tuple[Executor, RecordingBackend]) -> None:
    executor, recording = recorded
    assert executor.validate_proposal(*DOUBLE[:2]).output == DOUBLE[2]
    victim = recording.containers(GOLD_HASH_SEED)[-1]
    lost_before = executor.stats()["gold"]["lost"]
    killer = threading.Timer(0.5, lambda: recording.backend._client.api.kill(victim))
    killer.start()
    result = executor.validate_proposal(SLEEP_THEN_ECHO, "7")
    killer.join()
    assert (result.status, result.output) == (ExecStatus.OK, "7"), result
    assert executor.stats()["gold"]["lost"] == lost_before + 1
    assert recording.containers(GOLD_HASH_SEED)[-1] != victim
    assert victim not in [entry["Id"] for entry in wait_until_gone_only(recording.backend, victim)]


def wait_until_gone_only(backend: DockerBackend, container_id: str) -> list[dict[str, Any]]:
    """Containers of the backend whose id is `container_id`, after waiting up to 15 s for it to disappear."""
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        left = [entry for entry in owned_containers(backend) if entry["Id"] == container_id]
        if not left:
            return left
        time.sleep(0.2)
    return left


def test_a_program_that_kills_its_worker_twice_is_crashed(recorded: tuple[Executor, RecordingBackend]) -> None:
    executor, recording = recorded
    started = len(recording.containers(GOLD_HASH_SEED))
    result = executor.validate_proposal("import os, signal\ndef f(x):\n    os.kill(os.getppid(), signal.SIGKILL)", "1")
    assert result.status is ExecStatus.CRASHED and "twice" in (result.error or "")
    assert executor.validate_proposal(*DOUBLE[:2]).output == DOUBLE[2]
    assert len(recording.containers(GOLD_HASH_SEED)) == started + 2


def test_recycling_after_n_tasks_starts_new_containers_and_nothing_leaks(
        docker_available: Callable[..., DockerBackend]) -> None:
    recording = RecordingBackend(docker_available(LIMITS))
    with Executor(channel_factory=recording, workers=1, limits=LIMITS, recycle_after=2) as executor:
        for _ in range(4):  # 5 jobs per slot with the zero triplet the executor runs at start
            assert executor.validate_proposal(*DOUBLE[:2]).output == DOUBLE[2]
        gold = executor.stats()["gold"]
        assert len(owned_containers(recording.backend)) >= 2  # the live gold and verify workers
    assert gold["recycled"] == 2 and gold["started"] == 3 and gold["lost"] == 0
    assert len(set(recording.containers(GOLD_HASH_SEED))) == 3
    assert wait_until_gone(recording.backend) == []


def test_a_container_whose_client_vanished_removes_itself(docker_available: Callable[..., DockerBackend]) -> None:
    """If the executor process dies without closing, the worker reads EOF, exits, and auto-remove deletes it."""
    backend = docker_available(LIMITS)
    try:
        channel = backend(GOLD_HASH_SEED)
        channel.send({"v": PROTOCOL_VERSION, "id": "hello", "op": "ping"})
        assert channel.receive(30)["ok"]
        channel._raw.shutdown(socket.SHUT_RDWR)  # what the engine sees when this process is killed
        assert wait_until_gone(backend) == []
    finally:
        backend.close()


def test_gold_outputs_equal_the_process_backends(docker_available: Callable[..., DockerBackend]) -> None:
    """Same interpreter version and hash seed: a hash-order-dependent gold output is the same on both backends."""
    items = [(SET_ORDER, f"'{word}'") for word in ("fig", "grape", "kiwi")]
    with Executor(channel_factory=docker_available(LIMITS), workers=1, limits=LIMITS) as docker, \
            Executor(workers=1, limits=LIMITS) as process:
        on_docker = [(r.status, r.output, r.error) for r in docker.validate_many(items)]
        on_process = [(r.status, r.output, r.error) for r in process.validate_many(items)]
    assert on_docker == on_process
    assert any(status is ExecStatus.NONDETERMINISTIC for status, _, _ in on_docker)  # gold set order in play


def test_from_settings_builds_the_docker_backend(docker_available: Callable[..., DockerBackend]) -> None:
    image = os.environ.get("AZR_EXECUTOR_IMAGE", "azr-executor:1")
    settings = Settings(executor_backend="docker", executor_docker_image=image, executor_workers=1,
                        executor_timeout_s=4.0, executor_memory_mb=320, executor_max_processes=16)
    with Executor.from_settings(settings.executor) as executor:
        assert executor.isolation == "docker" and executor.limits.memory_mb == 320
        assert executor.validate_proposal(*DOUBLE[:2]).output == DOUBLE[2]
        backend = executor._backend
        host = inspect(backend, owned_containers(backend)[0]["Id"])["HostConfig"]
        assert host["Memory"] == (320 + MEMORY_HEADROOM_MB) << 20 and host["PidsLimit"] == 16 + PIDS_HEADROOM
    assert wait_until_gone(backend) == []


def test_a_missing_image_is_a_clear_sandbox_error(docker_available: Callable[..., DockerBackend]) -> None:
    with pytest.raises(SandboxUnavailable, match="make executor-image"):
        DockerBackend(f"azr-executor-missing:{os.getpid()}")
