"""k8s/ as rendered: Redis requires the password from the secret, which every pod that uses it gets as a file (never
in an environment, a URL or a command line), KEDA can read the queue through the NetworkPolicies with that password,
the executor pods run generated code under bubblewrap (and refuse to start without it), and the SGLang pods' init
step can write the model directory."""

from __future__ import annotations

from typing import Any

import pytest
from deploy_tools import OVERLAYS, objects_of

REDIS_CLIENTS = {"proposer-api", "solver-api", "executor", "coordinator", "trainer"}
"""Workloads that talk to Redis (RQ jobs, the episode stream, the policy version)."""
PASSWORD_FILE = "/run/secrets/azr_redis_password"


def workloads(objects: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Deployments, StatefulSets and Jobs by name."""
    return objects_of(objects, "Deployment") | objects_of(objects, "StatefulSet") | objects_of(objects, "Job")


def containers(workload: dict[str, Any]) -> list[dict[str, Any]]:
    """Init containers and containers of a workload's pod template."""
    spec = workload["spec"]["template"]["spec"]
    return spec.get("initContainers", []) + spec["containers"]


def env_of(container: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """A container's `env` entries by name."""
    return {entry["name"]: entry for entry in container.get("env", [])}


def generated_secret(objects: list[dict[str, Any]]) -> str:
    (secret,) = [o["metadata"]["name"] for o in objects if o["kind"] == "Secret"]
    return str(secret)


def secret_files(objects: list[dict[str, Any]], workload: dict[str, Any], container: dict[str, Any]) -> dict[str, str]:
    """key of the generated secret -> file under /run/secrets, for what `container` mounts there."""
    mounted = {m["name"] for m in container.get("volumeMounts", []) if m["mountPath"] == "/run/secrets"}
    found = {}
    for volume in workload["spec"]["template"]["spec"].get("volumes", []):
        if volume["name"] in mounted and "secret" in volume:
            assert volume["secret"]["secretName"] == generated_secret(objects)
            found |= {item["key"]: item["path"] for item in volume["secret"]["items"]}
    return found


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_redis_requires_the_secret_password_and_keeps_its_append_only_file(rendered_overlays: dict[str, Any],
                                                                           overlay: str) -> None:
    objects = rendered_overlays[overlay]
    redis = objects_of(objects, "StatefulSet")["redis"]
    (container,) = containers(redis)
    script = " ".join(container["command"] + container["args"])
    assert PASSWORD_FILE in script and "requirepass" in script and "--appendonly yes" in script
    assert "--requirepass" not in script, "the password would be on redis-server's command line"
    assert not container.get("env"), "nothing of the password in the environment (REDISCLI_AUTH included)"
    assert secret_files(objects, redis, container) == {"redis-password": "azr_redis_password"}
    assert PASSWORD_FILE in " ".join(container["readinessProbe"]["exec"]["command"])


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_redis_client_gets_the_password_as_a_file(rendered_overlays: dict[str, Any], overlay: str) -> None:
    objects = rendered_overlays[overlay]
    settings = next(o for o in objects if o["kind"] == "ConfigMap" and o["metadata"]["name"].startswith("azr-settings"))
    assert settings["data"]["AZR_REDIS_URL"] == "redis://redis:6379/0", "the shared URL carries no password"
    clients = set()
    for name, workload in workloads(objects).items():
        for container in workload["spec"]["template"]["spec"]["containers"]:
            assert "AZR_REDIS_URL" not in env_of(container), f"{name}: its own URL (a password in it?)"
            if secret_files(objects, workload, container).get("redis-password") == "azr_redis_password":
                clients.add(name)
    assert REDIS_CLIENTS <= clients, f"{overlay}: no password file in {REDIS_CLIENTS - clients}"
    assert clients <= REDIS_CLIENTS | {"redis"}, f"{overlay}: the Redis password where it is not used"


def test_keda_reads_the_queue_with_the_password_through_the_network_policies(rendered_overlays: dict[str, Any]) -> None:
    objects = rendered_overlays["gpu"]
    trigger = objects_of(objects, "ScaledObject")["executor"]["spec"]["triggers"][0]
    authentication = objects_of(objects, "TriggerAuthentication")[trigger["authenticationRef"]["name"]]
    (reference,) = authentication["spec"]["secretTargetRef"]
    assert (reference["parameter"], reference["name"], reference["key"]) == (
        "password", generated_secret(objects), "redis-password")
    redis_labels = objects_of(objects, "StatefulSet")["redis"]["spec"]["template"]["metadata"]["labels"]
    admitting = []
    for policy in objects_of(objects, "NetworkPolicy").values():
        selector = policy["spec"]["podSelector"].get("matchLabels", {})
        if not selector or not selector.items() <= redis_labels.items():
            continue
        for rule in policy["spec"].get("ingress", []):
            ports = {(p.get("protocol", "TCP"), p["port"]) for p in rule.get("ports", [])}
            for peer in rule.get("from", []):
                namespace = peer.get("namespaceSelector", {}).get("matchLabels", {})
                if namespace.get("kubernetes.io/metadata.name") == "keda" and ("TCP", 6379) in ports:
                    admitting.append(policy["metadata"]["name"])
    assert admitting, "no NetworkPolicy lets KEDA's operator (namespace keda) reach Redis on 6379"
    for overlay in ("cpu-dev",):  # no KEDA there: no opening either
        assert not any("keda" in str(p) for p in objects_of(rendered_overlays[overlay], "NetworkPolicy").values())


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_executor_pods_sandbox_generated_code_with_bubblewrap(rendered_overlays: dict[str, Any], overlay: str) -> None:
    """bwrap, not auto: a pod where bubblewrap cannot run must refuse work, not fall back to rlimits only. Its
    unshare(2) needs a seccomp profile that allows it (RuntimeDefault does not)."""
    executor = objects_of(rendered_overlays[overlay], "Deployment")["executor"]["spec"]["template"]["spec"]
    (container,) = executor["containers"]
    values = {name: entry.get("value") for name, entry in env_of(container).items()}
    assert (values["AZR_EXECUTOR_BACKEND"], values["AZR_EXECUTOR_SANDBOX"]) == ("process", "bwrap")
    security = container["securityContext"]
    assert security["seccompProfile"]["type"] in ("Unconfined", "Localhost")
    assert security["allowPrivilegeEscalation"] is False and security["capabilities"]["drop"] == ["ALL"]
    assert security["readOnlyRootFilesystem"] is True and executor["securityContext"]["runAsNonRoot"] is True


@pytest.mark.parametrize("overlay", ("gpu", "gpu-multinode"))
def test_the_sglang_init_step_can_write_the_model_directory(rendered_overlays: dict[str, Any], overlay: str) -> None:
    for name in ("sglang-propose", "sglang-solve"):
        spec = objects_of(rendered_overlays[overlay], "StatefulSet")[name]["spec"]["template"]["spec"]
        (prep,) = spec["initContainers"]
        writes = [m for m in prep["volumeMounts"] if m["mountPath"] == "/var/lib/azr/models"]
        assert writes and not writes[0].get("readOnly")
        group = spec.get("securityContext", {}).get("fsGroup")
        assert group is not None and group == prep["securityContext"]["runAsGroup"], \
            f"{name}: the volume must belong to the init container's group (fsGroup)"


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_inference_server_requires_the_admin_key_from_the_secret(rendered_overlays: dict[str, Any],
                                                                      overlay: str) -> None:
    """Every inference pod (role `inference`) guards its control endpoints with the secret's sglang-admin-api-key,
    mounted as a file: SGLang gets it as `--admin-api-key` read by the shell that starts it (a flag is its only way;
    it is in no pod spec or environment), `azr serve inference` reads the file itself (its settings)."""
    objects = rendered_overlays[overlay]
    servers = {name: workload for name, workload in workloads(objects).items()
               if workload["spec"]["template"]["metadata"]["labels"].get("azr.io/role") == "inference"}
    assert {"sglang-propose", "sglang-solve"} <= set(servers), f"{overlay}: inference workloads {sorted(servers)}"
    for name, workload in servers.items():
        (container,) = workload["spec"]["template"]["spec"]["containers"]
        args = [str(arg) for arg in container.get("command", []) + container.get("args", [])]
        assert secret_files(objects, workload, container) == {"sglang-admin-api-key": "azr_sglang_admin_api_key"}
        assert not any("valueFrom" in entry for entry in container.get("env", [])), f"{overlay}/{name}"
        if container["name"] == "sglang":
            assert "/run/secrets/azr_sglang_admin_api_key" in " ".join(args) and "--admin-api-key" in " ".join(args)
        else:
            assert args[:2] == ["serve", "inference"], f"{overlay}/{name}: an inference server of an unknown kind"
            assert not any("admin" in arg.lower() or "$(" in arg for arg in args), f"{overlay}/{name}: key in args"
