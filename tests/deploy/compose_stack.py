"""A real `docker compose --profile cpu` stack for tests: images built from the offline base, a unique project name,
loopback ports chosen free, logs saved to a file, torn down with its volumes."""

from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
import uuid
from pathlib import Path
from typing import Any

import httpx
from deploy_tools import write_compose_secrets
from throwaway_servers import REPO_ROOT, free_port, skip_or_fail

TORCH_WHEEL = "torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl"
LOCAL_WHEELS = Path(os.environ.get("AZR_LOCAL_WHEELS", "/opt/wheels"))
BASE_IMAGE = "azr-python-base:3.11"
STORE_IMAGES = {"REDIS_IMAGE": "azr-redis:offline", "POSTGRES_IMAGE": "azr-postgres:offline"}
APP_IMAGE = "azr:stack-test"
SMALL_SIZES = {
    "AZR_MODEL": "tiny",
    "AZR_BATCH_SIZE": "2",
    "AZR_SEED_MULTIPLIER": "1",
    "AZR_SEED_MAX_ROUNDS": "1",
    "AZR_LEARNABILITY_SAMPLES": "2",
    "AZR_MAX_PROMPT_TOKENS": "2048",
    "AZR_MAX_RESPONSE_TOKENS": "16",
    "AZR_MICRO_BATCH_SIZE": "4",
    "AZR_STEPS": "1",
    "AZR_CHECKPOINT_EVERY": "1",  # the one update of the test's one step is checkpointed too
    "AZR_EXECUTOR_WORKERS": "2",
}
"""The embedded end-to-end test's sizes (tests/services/coordinator/test_embedded_run.py): B = 2, short responses."""


def docker_engine() -> str:
    """The docker client binary, once `docker info` answers (skips on a laptop without one, fails in CI)."""
    docker = "/usr/bin/docker" if Path("/usr/bin/docker").exists() else shutil.which("docker")
    if docker is None or subprocess.run([docker, "info"], capture_output=True, timeout=60, check=False).returncode != 0:
        skip_or_fail("no Docker engine answers `docker info`")
    return str(docker)


def run_checked(argv: list[str], timeout_s: float, env: dict[str, str] | None = None) -> str:
    """Run a command; AssertionError with its output when it fails."""
    result = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s, env=env, cwd=REPO_ROOT)
    assert result.returncode == 0, f"{' '.join(argv)} exited {result.returncode}:\n{result.stdout}\n{result.stderr}"
    return result.stdout


def build_images(docker: str) -> None:
    """The offline base, Redis/Postgres, the executor sandbox and the application image (torch from the local CPU
    wheel). Each script is idempotent and docker caches the dependency layers, so a rebuild costs the code layers."""
    env = {**os.environ, "DOCKER": docker}
    run_checked(["bash", "docker/build_offline_base.sh", BASE_IMAGE], 900, env)
    run_checked(["bash", "docker/build_offline_stores.sh"], 900, env)
    run_checked(["bash", "executor_svc/image/build_offline.sh"], 900, env)
    wheel = REPO_ROOT / "docker" / "wheels" / TORCH_WHEEL
    if not wheel.exists():
        shutil.copyfile(LOCAL_WHEELS / TORCH_WHEEL, wheel)
    run_checked([docker, "build", "--network", "host", "--build-arg", f"BASE_IMAGE={BASE_IMAGE}",
                 "--build-arg", f"TORCH_WHEEL={TORCH_WHEEL}", "-t", APP_IMAGE, "."], 1800, env)


class ComposeStack:
    """One compose project of the cpu profile, isolated by its project name and ports."""

    def __init__(self, compose: list[str], docker: str, log_dir: Path) -> None:
        self.compose = compose
        self.docker = docker
        self.project = f"azrtest{uuid.uuid4().hex[:8]}"
        self.log_path = log_dir / f"{self.project}.log"
        self.token = secrets.token_urlsafe(24)
        self.redis_password = secrets.token_urlsafe(24)
        self.postgres_password = secrets.token_urlsafe(16)
        self.admin_key = secrets.token_urlsafe(24)
        self.secret_values = {"azr_api_token": self.token, "azr_database_password": self.postgres_password,
                              "azr_redis_password": self.redis_password, "azr_sglang_admin_api_key": self.admin_key}
        secrets_env = write_compose_secrets(log_dir / f"{self.project}-secrets", self.secret_values)
        self.ports = {name: free_port() for name in ("proposer", "solver", "propose", "solve", "redis", "postgres",
                                                     "coordinator_metrics", "trainer_metrics")}
        self.env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "DOCKER_HOST": os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock"),
            "AZR_IMAGE": APP_IMAGE,
            **secrets_env,
            "AZR_RUN_ID": "stack",
            "AZR_DOCKER_GID": str(os.stat("/var/run/docker.sock").st_gid),
            "AZR_PROPOSER_HOST_PORT": str(self.ports["proposer"]),
            "AZR_SOLVER_HOST_PORT": str(self.ports["solver"]),
            "AZR_INFERENCE_PROPOSE_HOST_PORT": str(self.ports["propose"]),
            "AZR_INFERENCE_SOLVE_HOST_PORT": str(self.ports["solve"]),
            "AZR_REDIS_HOST_PORT": str(self.ports["redis"]),
            "AZR_POSTGRES_HOST_PORT": str(self.ports["postgres"]),
            "AZR_COORDINATOR_METRICS_HOST_PORT": str(self.ports["coordinator_metrics"]),
            "AZR_TRAINER_METRICS_HOST_PORT": str(self.ports["trainer_metrics"]),
            **STORE_IMAGES,
            **SMALL_SIZES,
        }

    def run(self, *args: str, timeout_s: float = 600, check: bool = True) -> subprocess.CompletedProcess[str]:
        """`compose -p PROJECT --profile cpu ARGS...` in the repository."""
        argv = [*self.compose, "-p", self.project, "-f", str(REPO_ROOT / "docker-compose.yml"),
                "--profile", "cpu", *args]
        result = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s, env=self.env, cwd=REPO_ROOT)
        if check:
            assert result.returncode == 0, f"{' '.join(args)} exited {result.returncode}:\n{result.stderr}"
        return result

    def url(self, name: str) -> str:
        """Loopback base URL of a published service port."""
        return f"http://127.0.0.1:{self.ports[name]}"

    def redis_url(self) -> str:
        """The stack's Redis on its loopback port, with its password."""
        return f"redis://:{self.redis_password}@127.0.0.1:{self.ports['redis']}/0"

    def get_json(self, name: str, path: str) -> Any:
        """GET a JSON document from a published service (raises on connection errors and non-2xx)."""
        response = httpx.get(self.url(name) + path, timeout=10)
        response.raise_for_status()
        return response.json()

    def container_state(self, service: str) -> dict[str, Any]:
        """`docker inspect` State of the service's (first) container; {} when it has none."""
        ids = self.run("ps", "-q", service, check=False).stdout.split()
        if not ids:
            return {}
        return json.loads(run_checked([self.docker, "inspect", "-f", "{{json .State}}", ids[0]], 60))

    def exec_python(self, service: str, source: str, *args: str) -> str:
        """stdout of `python -c SOURCE ARGS` in the service's running container (the image has no coreutils)."""
        return self.run("exec", "-T", service, "python", "-c", source, *args, timeout_s=120).stdout

    def read_file(self, service: str, path: str) -> str:
        """A text file's content as the service's container sees it."""
        return self.exec_python(service, "import sys; sys.stdout.write(open(sys.argv[1]).read())", path)

    def list_dir(self, service: str, path: str) -> list[str]:
        """Names in a directory as the service's container sees it."""
        return self.exec_python(service, "import os, sys; print(*sorted(os.listdir(sys.argv[1])))", path).split()

    def save_logs(self) -> str:
        """Every container's log, written to `log_path`; returns the text."""
        logs = self.run("logs", "--no-color", "--timestamps", timeout_s=120, check=False)
        text = logs.stdout + logs.stderr
        self.log_path.write_text(text)
        return text

    def down(self) -> None:
        """Stop and remove the project's containers, network and volumes, and its secret files."""
        self.run("down", "--volumes", "--remove-orphans", "--timeout", "20", timeout_s=300, check=False)
        shutil.rmtree(self.env["AZR_SECRETS_DIR"], ignore_errors=True)
