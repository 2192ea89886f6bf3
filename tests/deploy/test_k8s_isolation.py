"""k8s/ as rendered: Redis requires the password from the secret and every client URL carries it, KEDA can read the
queue through the NetworkPolicies with that password, the executor pods run generated code under bubblewrap (and
refuse to start without it), and the SGLang pods' init step can write the model directory."""

from __future__ import annotations

from typing import Any

import pytest
from deploy_tools import OVERLAYS, objects_of

REDIS_CLIENTS = {"proposer-api", "solver-api", "executor", "coordinator", "trainer"}
"""Workloads that talk to Redis (RQ jobs, the episode stream, the policy version)."""
PASSWORD_VARIABLE = "REDIS_PASSWORD"


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


def redis_password_key(objects: list[dict[str, Any]], entry: dict[str, Any]) -> tuple[str, str]:
    """(secret, key) behind an env entry, asserting it is the generated secret's redis-password."""
    ref = entry["valueFrom"]["secretKeyRef"]
    (secret,) = [o["metadata"]["name"] for o in objects if o["kind"] == "Secret"]
    assert (ref["name"], ref["key"]) == (secret, "redis-password"), ref
    return ref["name"], ref["key"]


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_redis_requires_the_secret_password_and_keeps_its_append_only_file(rendered_overlays: dict[str, Any],
                                                                           overlay: str) -> None:
    objects = rendered_overlays[overlay]
    (container,) = containers(objects_of(objects, "StatefulSet")["redis"])
    args = container["args"]
    assert args[args.index("--requirepass") + 1] == f"$({PASSWORD_VARIABLE})"
    assert args[args.index("--appendonly") + 1] == "yes"
    env = env_of(container)
    redis_password_key(objects, env[PASSWORD_VARIABLE])
    redis_password_key(objects, env["REDISCLI_AUTH"])  # the probes' redis-cli
    assert container["readinessProbe"]["exec"]["command"][0] == "redis-cli"


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_redis_client_url_carries_the_password(rendered_overlays: dict[str, Any], overlay: str) -> None:
    objects = rendered_overlays[overlay]
    settings = next(o for o in objects if o["kind"] == "ConfigMap" and o["metadata"]["name"].startswith("azr-settings"))
    assert "AZR_REDIS_URL" not in settings["data"], "a shared URL in the ConfigMap would carry no password"
    clients = set()
    for name, workload in workloads(objects).items():
        for container in containers(workload):
            env = env_of(container)
            if "AZR_REDIS_URL" not in env:
                continue
            names = list(env)
            assert env["AZR_REDIS_URL"]["value"] == f"redis://:$({PASSWORD_VARIABLE})@redis:6379/0", name
            assert names.index(PASSWORD_VARIABLE) < names.index("AZR_REDIS_URL"), f"{name}: $(...) needs it first"
            redis_password_key(objects, env[PASSWORD_VARIABLE])
            clients.add(name)
    assert REDIS_CLIENTS <= clients, f"{overlay}: no password URL in {REDIS_CLIENTS - clients}"


def test_keda_reads_the_queue_with_the_password_through_the_network_policies(rendered_overlays: dict[str, Any]) -> None:
    objects = rendered_overlays["gpu"]
    trigger = objects_of(objects, "ScaledObject")["executor"]["spec"]["triggers"][0]
    executor = objects_of(objects, "Deployment")["executor"]["spec"]["template"]["spec"]["containers"][0]
    redis_password_key(objects, env_of(executor)[trigger["metadata"]["passwordFromEnv"]])
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
    """Every inference pod (role `inference`) guards its control endpoints with the secret's sglang-admin-api-key:
    SGLang through `--admin-api-key $(SGLANG_ADMIN_API_KEY)` (a flag is its only way), `azr serve inference` through
    AZR_SGLANG_ADMIN_API_KEY in its environment with nothing key-like in its args."""
    objects = rendered_overlays[overlay]
    (secret,) = [o["metadata"]["name"] for o in objects if o["kind"] == "Secret"]
    servers = {name: workload for name, workload in workloads(objects).items()
               if workload["spec"]["template"]["metadata"]["labels"].get("azr.io/role") == "inference"}
    assert {"sglang-propose", "sglang-solve"} <= set(servers), f"{overlay}: inference workloads {sorted(servers)}"
    for name, workload in servers.items():
        (container,) = workload["spec"]["template"]["spec"]["containers"]
        env, args = env_of(container), [str(arg) for arg in container.get("args", [])]
        if container.get("command") == ["python3", "-m", "sglang.launch_server"]:
            assert args[args.index("--admin-api-key") + 1] == "$(SGLANG_ADMIN_API_KEY)", name
            variable = "SGLANG_ADMIN_API_KEY"
        else:
            assert args[:2] == ["serve", "inference"], f"{overlay}/{name}: an inference server of an unknown kind"
            assert not any("admin" in arg.lower() or "$(" in arg for arg in args), f"{overlay}/{name}: key in args"
            variable = "AZR_SGLANG_ADMIN_API_KEY"
        ref = env[variable]["valueFrom"]["secretKeyRef"]
        assert (ref["name"], ref["key"]) == (secret, "sglang-admin-api-key"), f"{overlay}/{name}: {ref}"
