"""What the deployment tests share besides fixtures: the overlays and profiles under test, and how to run the
compose and kustomize CLIs. A module of its own (not conftest.py) so test files import it by a unique name."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

from throwaway_servers import REPO_ROOT

OVERLAYS = ("gpu", "cpu-dev", "gpu-multinode")
PROFILES = ("cpu", "gpu")
COMPOSE_SECRETS = {"azr_api_token": "compose-test-token", "azr_database_password": "compose-test-password",
                   "azr_redis_password": "compose-test-redis-password",
                   "azr_sglang_admin_api_key": "compose-test-admin-key"}
"""The secret files docker-compose.yml mounts (throwaway values; docker/compose_secrets.sh makes real ones)."""
REQUIRED_COMPOSE_ENV = {"AZR_DOCKER_GID": "999"}
"""What docker-compose.yml refuses to start without (besides the secret files)."""


def write_compose_secrets(directory: Path, values: dict[str, str] | None = None) -> dict[str, str]:
    """The secret files in `directory`; returns the environment that points compose at them (AZR_SECRETS_DIR)."""
    directory.mkdir(parents=True, exist_ok=True)
    for name, value in (values or COMPOSE_SECRETS).items():
        (directory / name).write_text(value)
        (directory / name).chmod(0o644)
    return {**REQUIRED_COMPOSE_ENV, "AZR_SECRETS_DIR": str(directory)}
K8S_SECRETS = {"api-token": "test-token", "postgres-password": "test-password", "redis-password": "test-redis-password",
               "sglang-admin-api-key": "test-admin-key"}
"""Throwaway inputs of the `azr-secrets` generator (k8s/base/secrets/, never committed)."""


def compose_command() -> list[str] | None:
    """`docker compose` (v2 plugin) when it answers, else Debian's `docker-compose` (1.29), else None."""
    docker = shutil.which("docker")
    if docker and subprocess.run([docker, "compose", "version"], capture_output=True).returncode == 0:
        return [docker, "compose"]
    legacy = shutil.which("docker-compose")
    return [legacy] if legacy else None


def run_compose_config(compose: list[str], profile: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """`compose --profile P config` on the repository's docker-compose.yml with exactly `env` (plus PATH)."""
    return subprocess.run([*compose, "--project-directory", str(REPO_ROOT), "-f", str(REPO_ROOT / "docker-compose.yml"),
                           "--profile", profile, "config"], capture_output=True, text=True, cwd=REPO_ROOT,
                          env={"PATH": "/usr/local/bin:/usr/bin:/bin", **env}, timeout=120)


def active_services(config: dict[str, Any], profile: str) -> dict[str, Any]:
    """Services a `--profile P up` starts: those without profiles and those naming P (compose v1's `config` prints
    every service, v2's only the active ones; this filter gives both the same answer)."""
    return {name: service for name, service in config["services"].items()
            if not service.get("profiles") or profile in service["profiles"]}


def kustomize_command() -> list[str] | None:
    """`kubectl kustomize` when kubectl has it, else a standalone `kustomize build`, else None."""
    kubectl = shutil.which("kubectl")
    if kubectl and subprocess.run([kubectl, "kustomize", "--help"], capture_output=True).returncode == 0:
        return [kubectl, "kustomize"]
    kustomize = shutil.which("kustomize")
    return [kustomize, "build"] if kustomize else None


def objects_of(objects: list[dict[str, Any]], kind: str) -> dict[str, dict[str, Any]]:
    """Objects of one kind by name."""
    return {obj["metadata"]["name"]: obj for obj in objects if obj["kind"] == kind}
