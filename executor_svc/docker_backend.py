"""The `docker` backend: long-lived hardened containers, each running the same stdlib-only worker as `process`.

One container per worker (never per snippet): `WorkerPool` asks this factory for a channel, sends it jobs for as long
as it lives, and replaces it after `recycle_after` jobs or any crash (the channel's close() force-removes it).
Hardening of every container: no network, read-only root, a size-capped noexec tmpfs /tmp (the only writable place),
memory = swap cap (no swap), a pids cap, one CPU, no IPC namespace sharing, all capabilities dropped, an unprivileged
uid of its own with gid 65534 (nogroup), no-new-privileges, an open-files ulimit, and an environment holding only
PYTHONHASHSEED (per pool: gold 0, verify 1), PATH and two python switches. The worker's per-task rlimits (address
space = memory_mb, CPU, files, processes) still apply inside; the container caps sit a little above them, as the
backstop for the whole worker.

Why the worker is sent over stdin rather than baked into the image: the image then never goes stale against the
executor that talks to it (one protocol version, one source), any image with a python3 >= 3.9 on PATH works
(build_offline.sh's or the Dockerfile's), and the cost is ~25 KB on a stream we open anyway.

Why not uid 65534 for every container: containers share the host's user namespace, and RLIMIT_NPROC (the worker's
per-task process cap) counts every process of a uid on the host. With one shared uid a fork bomb in one container (or
any other uid-65534 process on the host) made forks fail in the others: wrong verdicts for innocent tasks. Each
container therefore runs as a random uid from a range no host account uses (no passwd entry, no capabilities, owns
no file outside its tmpfs), so the per-task cap counts that container's processes only; the pids cgroup caps it too.

Containers carry the labels `azr.executor=1` and `azr.executor.owner=<this backend's id>`; close() removes any that
are left with the owner label (a backstop for channels that were never closed). They are also created with
auto-remove, so a container whose worker exits after this process died (its stdin closes) removes itself.
"""

from __future__ import annotations

import logging
import secrets
import threading
import uuid
from pathlib import Path

import docker
from docker.errors import APIError, NotFound
from docker.types import Ulimit

from executor_svc.docker_channel import BOOTSTRAP, DockerWorkerChannel
from executor_svc.errors import SandboxUnavailable

log = logging.getLogger(__name__)

WORKER_SOURCE = Path(__file__).with_name("worker.py")
LABEL = "azr.executor"
OWNER_LABEL = "azr.executor.owner"
CONTAINER_PATH = "/usr/local/bin:/usr/bin:/bin"
MEMORY_HEADROOM_MB = 256  # the worker itself + the forked child's non-AS overhead, above the per-task RLIMIT_AS
PIDS_HEADROOM = 8  # the bootstrap, the worker and its job child, above the per-task process cap
TMPFS_OPTIONS = "rw,noexec,nosuid,nodev,size=64m,mode=1777"
OPEN_FILES = 1024
SANDBOX_UID_BASE = 10_000_000  # far above host accounts and the usual subuid ranges (100000 + 65536 * n)
SANDBOX_UID_SPAN = 1_000_000_000
SANDBOX_GID = 65534  # nogroup
STOP_TIMEOUT_S = 10


def docker_client(timeout_s: float = 60.0) -> docker.DockerClient:
    """A docker SDK client from the environment (DOCKER_HOST or the local socket), API version negotiated."""
    try:
        client = docker.from_env(version="auto", timeout=int(timeout_s))
        client.ping()
    except Exception as exc:  # DockerException, requests' connection errors: no engine to talk to
        raise SandboxUnavailable(f"no Docker engine answers: {type(exc).__name__}: {exc}") from exc
    return client


class DockerBackend:
    """Channel factory of the docker backend: `backend(hash_seed)` starts one worker container. close() when done."""

    isolation = "docker"

    def __init__(self, image: str = "azr-executor:1", *, memory_mb: int = 1024, max_processes: int = 64,
                 cpus: float = 1.0, python: str = "python3", client: docker.DockerClient | None = None) -> None:
        """`memory_mb`/`max_processes` are the executor's per-task limits; the container caps sit just above them.
        Fails (SandboxUnavailable) at once when there is no engine or no such image."""
        self.image = image
        self.owner = uuid.uuid4().hex
        self.memory_mb = memory_mb + MEMORY_HEADROOM_MB
        self.pids_limit = max_processes + PIDS_HEADROOM
        self.nano_cpus = int(cpus * 1e9)
        self.python = python
        self._source = WORKER_SOURCE.read_bytes()
        self._client = client or docker_client()
        self._lock = threading.Lock()
        self._closed = False
        try:
            self._client.images.get(image)
        except Exception as exc:
            self._client.close()
            raise SandboxUnavailable(f"docker image {image!r} is not available ({type(exc).__name__}: {exc}); "
                                     "build it with `make executor-image`") from exc

    def container_config(self, hash_seed: int) -> dict[str, object]:
        """Keyword arguments of `APIClient.create_container` for one worker (public so tests can read them)."""
        host_config = self._client.api.create_host_config(
            network_mode="none", read_only=True, tmpfs={"/tmp": TMPFS_OPTIONS},
            mem_limit=f"{self.memory_mb}m", memswap_limit=f"{self.memory_mb}m", pids_limit=self.pids_limit,
            nano_cpus=self.nano_cpus, cap_drop=["ALL"], security_opt=["no-new-privileges"],
            ulimits=[Ulimit(name="nofile", soft=OPEN_FILES, hard=OPEN_FILES)], auto_remove=True, init=False,
            ipc_mode="none")
        return {
            "image": self.image,
            "command": [self.python, "-s", "-S", "-B", "-c", BOOTSTRAP, str(len(self._source))],
            # Not detached, so docker-py sets StdinOnce: when our attach connection closes, the worker reads EOF.
            "user": f"{SANDBOX_UID_BASE + secrets.randbelow(SANDBOX_UID_SPAN)}:{SANDBOX_GID}",
            "working_dir": "/tmp", "stdin_open": True, "tty": False,
            "environment": {"PYTHONHASHSEED": str(hash_seed), "PYTHONUTF8": "1", "PYTHONDONTWRITEBYTECODE": "1",
                            "PATH": CONTAINER_PATH},
            "labels": {LABEL: "1", OWNER_LABEL: self.owner, "azr.executor.hash_seed": str(hash_seed)},
            "network_disabled": True, "host_config": host_config, "stop_signal": "SIGKILL",
        }

    def __call__(self, hash_seed: int) -> DockerWorkerChannel:
        if self._closed:
            raise SandboxUnavailable("the docker backend is closed")
        api = self._client.api
        try:
            container_id = api.create_container(**self.container_config(hash_seed))["Id"]
        except Exception as exc:
            raise SandboxUnavailable(f"cannot create a worker container: {type(exc).__name__}: {exc}") from exc
        try:
            # Attach before start, so not a byte of the worker's output can be missed.
            response = api.attach_socket(container_id, params={"stdin": 1, "stdout": 1, "stderr": 1, "stream": 1})
            raw = getattr(response, "_sock", response)
            channel = DockerWorkerChannel(container_id, raw, response, lambda: self._remove(container_id))
            api.start(container_id)
            channel.host_pid = int(api.inspect_container(container_id)["State"]["Pid"]) or None
            channel.send_bytes(self._source)
        except Exception as exc:
            self._remove(container_id)
            raise SandboxUnavailable(f"cannot start a worker container: {type(exc).__name__}: {exc}") from exc
        return channel

    def _remove(self, container_id: str) -> None:
        """Kill and delete one container; gone already (auto-remove, or killed from outside) is fine."""
        try:
            self._client.api.remove_container(container_id, force=True)
        except NotFound:
            pass
        except APIError as exc:
            if exc.status_code != 409:  # 409: auto-remove is already deleting it
                log.warning("cannot remove worker container %s: %s", container_id[:12], exc)

    def leftover_containers(self) -> list[str]:
        """Ids of this backend's containers that still exist (running or not)."""
        found = self._client.api.containers(all=True, filters={"label": f"{OWNER_LABEL}={self.owner}"}, quiet=True)
        return [entry["Id"] for entry in found]

    def close(self) -> None:
        """Remove whatever container of this backend is left, then drop the client. Idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        try:
            for container_id in self.leftover_containers():
                self._remove(container_id)
        except Exception as exc:  # the engine went away: nothing more we can remove
            log.warning("cannot list leftover worker containers: %s", exc)
        finally:
            self._client.close()
