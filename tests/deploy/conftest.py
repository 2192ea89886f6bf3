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
from deploy_tools import (
    K8S_SECRETS,
    OVERLAYS,
    PROFILES,
    compose_command,
    kustomize_command,
    run_compose_config,
    write_compose_secrets,
)
from throwaway_servers import REPO_ROOT, skip_or_fail


@pytest.fixture(scope="session")
def compose() -> list[str]:
    """The compose CLI as an argv prefix."""
    command = compose_command()
    if command is None:
        skip_or_fail("no compose CLI (`docker compose` or `docker-compose`; run .ci/deploy_prereqs.sh)")
    return command


@pytest.fixture(scope="session")
def compose_env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """What compose needs besides its file: the group of the Docker socket and the secret files (throwaway)."""
    return write_compose_secrets(tmp_path_factory.mktemp("compose") / "secrets")


@pytest.fixture(scope="session")
def compose_configs(compose: list[str], compose_env: dict[str, str]) -> dict[str, dict[str, Any]]:
    """The resolved configuration of each profile, as compose prints it."""
    configs = {}
    for profile in PROFILES:
        result = run_compose_config(compose, profile, compose_env)
        assert result.returncode == 0, f"compose config --profile {profile} failed:\n{result.stderr}"
        configs[profile] = yaml.safe_load(result.stdout)
    return configs


@pytest.fixture(scope="session")
def kustomize() -> list[str]:
    """The kustomize command line (`kubectl kustomize` or `kustomize build`); skips when neither is installed."""
    command = kustomize_command()
    if command is None:
        skip_or_fail("no kustomize (`kubectl kustomize` from Debian's kubernetes-client, or `kustomize`)")
    return command


@pytest.fixture(scope="session")
def k8s_tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of k8s/ with throwaway secret inputs (the real ones are never committed; see k8s/README.md)."""
    root = tmp_path_factory.mktemp("k8s") / "k8s"
    shutil.copytree(REPO_ROOT / "k8s", root, ignore=shutil.ignore_patterns(*K8S_SECRETS))
    for name, value in K8S_SECRETS.items():
        (root / "base" / "secrets" / name).write_text(value)
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

