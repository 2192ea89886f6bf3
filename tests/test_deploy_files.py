"""Deployment files parse and reference only what exists."""

from __future__ import annotations

from pathlib import Path

import yaml

REPO_ROOT = Path(__file__).resolve().parent.parent


def test_docker_compose_parses_and_binds_loopback_only() -> None:
    compose = yaml.safe_load((REPO_ROOT / "docker-compose.yml").read_text())
    assert {"redis", "postgres"} <= set(compose["services"])
    for name, service in compose["services"].items():
        for port in service.get("ports", []):
            assert str(port).startswith("127.0.0.1:"), f"{name} publishes {port} beyond loopback"


def test_compose_has_no_default_database_password() -> None:
    postgres = yaml.safe_load((REPO_ROOT / "docker-compose.yml").read_text())["services"]["postgres"]
    assert postgres["environment"]["POSTGRES_PASSWORD"].startswith("${AZR_POSTGRES_PASSWORD:?")
