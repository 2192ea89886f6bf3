"""The least-privilege policy (deploy_policy.py) on what the deployments really resolve to, and on copies with one
planted violation of each rule, which it must catch (a policy check that cannot fail proves nothing)."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest
from deploy_policy import compose_violations, k8s_violations
from deploy_tools import COMPOSE_SECRETS, OVERLAYS, PROFILES, active_services, objects_of


@pytest.mark.parametrize("profile", PROFILES)
def test_compose_holds_the_policy(compose_configs: dict[str, Any], profile: str) -> None:
    config = {**compose_configs[profile], "services": active_services(compose_configs[profile], profile)}
    assert compose_violations(config, COMPOSE_SECRETS) == []


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_kubernetes_holds_the_policy(rendered_overlays: dict[str, Any], overlay: str) -> None:
    assert k8s_violations(rendered_overlays[overlay], overlay) == []


def _service(config: dict[str, Any], name: str) -> dict[str, Any]:
    return config["services"][name]


COMPOSE_PLANTS: dict[str, tuple[Callable[[dict[str, Any]], None], str]] = {
    "password in the environment": (
        lambda c: _service(c, "proposer-api")["environment"].update(AZR_REDIS_PASSWORD="x"), "secret-like variable"),
    "secret value in a URL": (
        lambda c: _service(c, "executor")["environment"].update(
            AZR_REDIS_URL=f"redis://:{COMPOSE_SECRETS['azr_redis_password']}@redis:6379/0"), "azr_redis_password"),
    "password on a command line": (
        lambda c: _service(c, "redis").update(command=["redis-server", "--requirepass",
                                                       COMPOSE_SECRETS["azr_redis_password"]]), "command"),
    "a secret it does not use": (
        lambda c: _service(c, "executor")["secrets"].append({"source": "azr_api_token"}), "does not use"),
    "capabilities kept": (lambda c: _service(c, "coordinator").pop("cap_drop"), "cap_drop"),
    "privileges may grow": (lambda c: _service(c, "solver-api").pop("security_opt"), "no-new-privileges"),
    "no memory limit": (lambda c: _service(c, "executor").pop("mem_limit"), "mem_limit"),
    "no pids limit": (lambda c: _service(c, "postgres").pop("pids_limit"), "pids_limit"),
    "writable root": (lambda c: _service(c, "migrate").pop("read_only"), "writable root"),
    "ipc host": (lambda c: _service(c, "redis").update(ipc="host"), "ipc: host"),
    "public port": (lambda c: _service(c, "proposer-api").update(ports=["0.0.0.0:8001:8001"]), "beyond loopback"),
    "socket with group 0": (lambda c: _service(c, "executor").update(group_add=["0"]), "group 0"),
    "socket elsewhere": (lambda c: _service(c, "coordinator")["volumes"].append(
        "/var/run/docker.sock:/var/run/docker.sock"), "holds the Docker socket"),
}


@pytest.mark.parametrize("plant", sorted(COMPOSE_PLANTS))
def test_a_planted_compose_violation_is_caught(compose_configs: dict[str, Any], plant: str) -> None:
    config = copy.deepcopy({**compose_configs["cpu"], "services": active_services(compose_configs["cpu"], "cpu")})
    mutate, expected = COMPOSE_PLANTS[plant]
    mutate(config)
    assert any(expected in line for line in compose_violations(config, COMPOSE_SECRETS)), plant


def _pod(objects: list[dict[str, Any]], kind: str, name: str) -> Any:
    return objects_of(objects, kind)[name]["spec"]["template"]["spec"]


def _container(objects: list[dict[str, Any]], kind: str, name: str) -> Any:
    return _pod(objects, kind, name)["containers"][0]


def _policy(objects: list[dict[str, Any]], name: str) -> dict[str, Any]:
    return objects_of(objects, "NetworkPolicy")[name]


K8S_PLANTS: dict[str, tuple[Callable[[list[dict[str, Any]]], None], str]] = {
    "token mounted": (lambda o: _pod(o, "Deployment", "coordinator").pop("automountServiceAccountToken"),
                      "service-account token"),
    "secret in env": (lambda o: _container(o, "Deployment", "executor").setdefault("env", []).append(
        {"name": "REDIS_PASSWORD", "valueFrom": {"secretKeyRef": {"name": "azr-secrets", "key": "redis-password"}}}),
        "secret in the environment"),
    "secret on the command line": (lambda o: _container(o, "StatefulSet", "redis").update(
        args=["--requirepass", "$(REDIS_PASSWORD)"]), "command line"),
    "all secret keys": (lambda o: next(v for v in _pod(o, "Deployment", "executor")["volumes"]
                                       if "secret" in v)["secret"].pop("items"), "holds every key"),
    "a secret it does not use": (lambda o: next(v for v in _pod(o, "Deployment", "solver-api")["volumes"]
                                                if "secret" in v)["secret"]["items"].append(
        {"key": "postgres-password", "path": "azr_database_password"}), "does not use"),
    "privilege escalation": (lambda o: _container(o, "Deployment", "proposer-api")["securityContext"].pop(
        "allowPrivilegeEscalation"), "privilege escalation"),
    "capabilities kept": (lambda o: _container(o, "StatefulSet", "postgres")["securityContext"].pop("capabilities"),
                          "capabilities not dropped"),
    "writable root": (lambda o: _container(o, "Deployment", "coordinator")["securityContext"].update(
        readOnlyRootFilesystem=False), "writable root"),
    "unconfined seccomp": (lambda o: _container(o, "Deployment", "solver-api")["securityContext"].update(
        seccompProfile={"type": "Unconfined"}), "Unconfined"),
    "no memory limit": (lambda o: _container(o, "StatefulSet", "redis")["resources"].pop("limits"), "memory limit"),
    "no default deny": (lambda o: o.remove(_policy(o, "default-deny")), "default-deny"),
    "sglang open to the namespace": (lambda o: _policy(o, "sglang-solve-from-its-clients")["spec"]["ingress"][0][
        "from"][0].update(podSelector={}), "reachable on 30000"),
    "rendezvous open to all": (lambda o: _policy(o, "trainer-edges")["spec"]["ingress"].append(
        {"ports": [{"protocol": "TCP", "port": 29400}]}), "29400"),
    "our image by tag": (lambda o: _container(o, "Deployment", "executor").update(image="registry.example.com/azr:1"),
                         "not pinned by digest"),
}


@pytest.mark.parametrize("plant", sorted(K8S_PLANTS))
def test_a_planted_kubernetes_violation_is_caught(rendered_overlays: dict[str, Any], plant: str) -> None:
    objects = copy.deepcopy(rendered_overlays["gpu"])
    mutate, expected = K8S_PLANTS[plant]
    mutate(objects)
    assert any(expected in line for line in k8s_violations(objects, "gpu")), plant
