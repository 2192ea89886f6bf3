"""Fixtures of the deployment tests: the compose CLI, rendered compose configurations and kustomize overlays.

The tools come from Debian packages (`docker-compose`, `kubectl`; .ci/deploy_prereqs.sh installs them). Without one
a test is skipped with the reason on a laptop and fails in CI (AZR_REQUIRE_SERVICES=1), like the servers in
tests/conftest.py.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from throwaway_servers import REPO_ROOT, free_port, skip_or_fail

OVERLAYS = ("gpu", "cpu-dev")
PROFILES = ("cpu", "gpu")
REQUIRED_COMPOSE_ENV = {"AZR_API_TOKEN": "compose-test-token", "AZR_POSTGRES_PASSWORD": "compose-test-password"}


def compose_command() -> list[str] | None:
    """`docker compose` (v2 plugin) when it answers, else Debian's `docker-compose` (1.29), else None."""
    docker = shutil.which("docker")
    if docker and subprocess.run([docker, "compose", "version"], capture_output=True).returncode == 0:
        return [docker, "compose"]
    legacy = shutil.which("docker-compose")
    return [legacy] if legacy else None


@pytest.fixture(scope="session")
def compose() -> list[str]:
    """The compose CLI as an argv prefix."""
    command = compose_command()
    if command is None:
        skip_or_fail("no compose CLI (`docker compose` or `docker-compose`; run .ci/deploy_prereqs.sh)")
    return command


def run_compose_config(compose: list[str], profile: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """`compose --profile P config` on the repository's docker-compose.yml with exactly `env` (plus PATH)."""
    return subprocess.run([*compose, "--project-directory", str(REPO_ROOT), "-f", str(REPO_ROOT / "docker-compose.yml"),
                           "--profile", profile, "config"], capture_output=True, text=True, cwd=REPO_ROOT,
                          env={"PATH": "/usr/local/bin:/usr/bin:/bin", **env}, timeout=120)


@pytest.fixture(scope="session")
def compose_configs(compose: list[str]) -> dict[str, dict[str, Any]]:
    """The resolved configuration of each profile, as compose prints it."""
    configs = {}
    for profile in PROFILES:
        result = run_compose_config(compose, profile, REQUIRED_COMPOSE_ENV)
        assert result.returncode == 0, f"compose config --profile {profile} failed:\n{result.stderr}"
        configs[profile] = yaml.safe_load(result.stdout)
    return configs


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


@pytest.fixture(scope="session")
def k8s_tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of k8s/ with throwaway secret inputs (the real ones are never committed; see k8s/README.md)."""
    root = tmp_path_factory.mktemp("k8s") / "k8s"
    shutil.copytree(REPO_ROOT / "k8s", root, ignore=shutil.ignore_patterns("api-token", "postgres-password"))
    (root / "base" / "secrets" / "api-token").write_text("test-token")
    (root / "base" / "secrets" / "postgres-password").write_text("test-password")
    return root


@pytest.fixture(scope="session")
def rendered_overlays(k8s_tree: Path) -> dict[str, list[dict[str, Any]]]:
    """Each overlay rendered by kustomize: its list of objects."""
    command = kustomize_command()
    if command is None:
        skip_or_fail("no kustomize (`kubectl kustomize` from Debian's kubernetes-client, or `kustomize`)")
    rendered = {}
    for overlay in OVERLAYS:
        result = subprocess.run([*command, str(k8s_tree / "overlays" / overlay)], capture_output=True, text=True,
                                timeout=120)
        assert result.returncode == 0, f"kustomize {overlay} failed:\n{result.stderr}"
        rendered[overlay] = [doc for doc in yaml.safe_load_all(result.stdout) if doc]
    return rendered


def objects_of(objects: list[dict[str, Any]], kind: str) -> dict[str, dict[str, Any]]:
    """Objects of one kind by name."""
    return {obj["metadata"]["name"]: obj for obj in objects if obj["kind"] == kind}
