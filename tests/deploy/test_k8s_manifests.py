"""k8s/: every file parses, each overlay renders with kustomize, every rendered object passes the Kubernetes
OpenAPI schema (strict: unknown fields fail) offline, and the deployment rules hold (GPU requests, probes that never
restart SGLang during a weight update, executor egress only to Redis, the shared checkpoint volume, no secret
value committed).

Schemas come bundled with PyPI's `kubernetes-validate`. The two CRD kinds (KEDA ScaledObject, Prometheus
Operator ServiceMonitor) have no bundled schema: they are skipped by the schema check (CRD_KINDS) and checked
structurally below instead.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml
from deploy_tools import K8S_SECRETS, OVERLAYS, objects_of
from throwaway_servers import REPO_ROOT

KUBERNETES_VERSION = "1.30"
CRD_KINDS = {("keda.sh/v1alpha1", "ScaledObject"), ("keda.sh/v1alpha1", "TriggerAuthentication"),
             ("monitoring.coreos.com/v1", "ServiceMonitor"), ("monitoring.coreos.com/v1", "PodMonitor")}
WORKLOAD_KINDS = ("Deployment", "StatefulSet", "Job")


def pod_spec(workload: dict[str, Any]) -> dict[str, Any]:
    """The pod template's spec of a Deployment, StatefulSet or Job."""
    return workload["spec"]["template"]["spec"]


def test_every_file_parses() -> None:
    files = sorted((REPO_ROOT / "k8s").rglob("*.yaml"))
    assert len(files) >= 10
    transformer_configs = {path.parent / name for path in files if path.name == "kustomization.yaml"
                           for name in (yaml.safe_load(path.read_text()) or {}).get("configurations", [])}
    for path in files:
        if path in transformer_configs:  # kustomize's own configuration, no Kubernetes object
            assert yaml.safe_load(path.read_text()), path
            continue
        documents = [doc for doc in yaml.safe_load_all(path.read_text()) if doc]
        assert documents, f"{path} holds no object"
        assert all("kind" in doc for doc in documents), path


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_rendered_objects_pass_the_kubernetes_schema(rendered_overlays: dict[str, Any], overlay: str) -> None:
    checked = 0
    for obj in rendered_overlays[overlay]:
        if (obj["apiVersion"], obj["kind"]) in CRD_KINDS:
            continue
        try:
            kubernetes_validate.validate(obj, KUBERNETES_VERSION, strict=True)
        except kubernetes_validate.ValidationError as error:
            pytest.fail(f"{overlay}: {obj['kind']}/{obj['metadata']['name']}: {error.message} at "
                        f"{'/'.join(map(str, error.path))}")
        checked += 1
    assert checked >= 20


def test_schema_check_rejects_a_broken_object(rendered_overlays: dict[str, Any]) -> None:
    deployment = next(o for o in rendered_overlays["gpu"] if o["kind"] == "Deployment")
    broken = json.loads(json.dumps(deployment))
    broken["spec"]["template"]["spec"]["containers"][0]["imagePullPolicy"] = 3
    broken["spec"]["replicass"] = 2
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, KUBERNETES_VERSION, strict=True)


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_overlay_runs_every_role(rendered_overlays: dict[str, Any], overlay: str) -> None:
    objects = rendered_overlays[overlay]
    deployments, statefulsets = objects_of(objects, "Deployment"), objects_of(objects, "StatefulSet")
    assert {"proposer-api", "solver-api", "executor", "coordinator"} <= set(deployments)
    assert "trainer" in deployments or "trainer" in statefulsets  # gpu-multinode: a torchrun StatefulSet
    assert {"redis", "postgres", "sglang-propose", "sglang-solve"} <= set(statefulsets)
    assert pod_spec(objects_of(objects, "Job")["azr-migrate"])["containers"][0]["args"] == ["db", "upgrade"]
    services = objects_of(objects, "Service")
    for name in ("redis", "postgres", "proposer-api", "solver-api", "sglang-propose", "sglang-solve"):
        assert name in services, f"{overlay}: no Service {name}"
    assert all(obj["metadata"].get("namespace") == "azr" for obj in objects if obj["kind"] != "Namespace")


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_container_has_requests_and_a_memory_limit(rendered_overlays: dict[str, Any], overlay: str) -> None:
    for kind in WORKLOAD_KINDS:
        for name, workload in objects_of(rendered_overlays[overlay], kind).items():
            spec = pod_spec(workload)
            for container in spec.get("initContainers", []) + spec["containers"]:
                resources = container.get("resources", {})
                assert resources.get("requests", {}).get("cpu"), f"{overlay} {name}/{container['name']}"
                assert resources.get("limits", {}).get("memory"), f"{overlay} {name}/{container['name']}"


def test_gpu_overlay_sglang_and_trainer(rendered_overlays: dict[str, Any]) -> None:
    objects = rendered_overlays["gpu"]
    for name in ("sglang-propose", "sglang-solve"):
        container = next(c for c in pod_spec(objects_of(objects, "StatefulSet")[name])["containers"]
                         if c["name"] == "sglang")
        image, _, tag = container["image"].rpartition(":")
        assert image == "lmsysorg/sglang" and tag not in ("", "latest")
        assert container["args"][container["args"].index("--host") + 1] == "0.0.0.0"
        assert container["resources"]["limits"]["nvidia.com/gpu"] == 1
        assert container["readinessProbe"]["httpGet"]["path"] == "/health"
        assert "livenessProbe" not in container, "a liveness restart would kill SGLang during a weight update"
        mounts = {m["mountPath"]: m for m in container["volumeMounts"]}
        assert mounts["/var/lib/azr/runs"]["name"] == "state"
    trainer = pod_spec(objects_of(objects, "Deployment")["trainer"])
    assert trainer["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == 1
    urls = json.loads(next(e["value"] for e in trainer["containers"][0]["env"] if e["name"] == "AZR_SGLANG_URLS"))
    assert urls == ["http://sglang-propose-0.sglang-propose:30000", "http://sglang-solve-0.sglang-solve:30000"]


def test_checkpoint_volume_is_shared_read_write_many(rendered_overlays: dict[str, Any]) -> None:
    objects = rendered_overlays["gpu"]
    claim = objects_of(objects, "PersistentVolumeClaim")["azr-state"]
    assert claim["spec"]["accessModes"] == ["ReadWriteMany"]
    users = [name for kind in ("Deployment", "StatefulSet") for name, w in objects_of(objects, kind).items()
             if any(v.get("persistentVolumeClaim", {}).get("claimName") == "azr-state"
                    for v in pod_spec(w).get("volumes", []))]
    assert {"trainer", "sglang-propose", "sglang-solve", "coordinator"} <= set(users)


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_executor_pods_reach_only_redis(rendered_overlays: dict[str, Any], overlay: str) -> None:
    objects = rendered_overlays[overlay]
    executor_labels = objects_of(objects, "Deployment")["executor"]["spec"]["template"]["metadata"]["labels"]
    policies = [p for p in objects_of(objects, "NetworkPolicy").values()
                if p["spec"]["podSelector"].get("matchLabels", {}).items() <= executor_labels.items()
                and p["spec"]["podSelector"].get("matchLabels")]
    assert len(policies) == 1
    spec = policies[0]["spec"]
    assert set(spec["policyTypes"]) == {"Ingress", "Egress"}
    # The only way in is a Prometheus scrape of the worker's own metrics port.
    metrics_port = int(objects_of(objects, "Deployment")["executor"]["spec"]["template"]["metadata"]["annotations"]
                       ["prometheus.io/port"])
    assert [rule["ports"] for rule in spec["ingress"]] == [[{"protocol": "TCP", "port": metrics_port}]]
    redis_labels = objects_of(objects, "StatefulSet")["redis"]["spec"]["template"]["metadata"]["labels"]
    for rule in spec["egress"]:
        ports = {(p["protocol"], p["port"]) for p in rule["ports"]}
        peer = rule["to"][0]
        if ports == {("TCP", 6379)}:
            assert peer["podSelector"]["matchLabels"].items() <= redis_labels.items()
        else:  # DNS, to resolve the Redis Service name
            assert ports <= {("UDP", 53), ("TCP", 53)} and peer["podSelector"]["matchLabels"] == {"k8s-app": "kube-dns"}
    executor = pod_spec(objects_of(objects, "Deployment")["executor"])
    assert executor["automountServiceAccountToken"] is False
    assert executor["containers"][0]["securityContext"]["readOnlyRootFilesystem"] is True


def test_secret_values_are_generated_not_committed(rendered_overlays: dict[str, Any]) -> None:
    kustomization = yaml.safe_load((REPO_ROOT / "k8s" / "base" / "kustomization.yaml").read_text())
    generator = next(g for g in kustomization["secretGenerator"] if g["name"] == "azr-secrets")
    for entry in generator["files"]:
        _, _, path = entry.partition("=")
        assert not (REPO_ROOT / "k8s" / "base" / path).exists() or _is_ignored(REPO_ROOT / "k8s" / "base" / path)
    secrets = [o for o in rendered_overlays["gpu"] if o["kind"] == "Secret"]
    assert len(secrets) == 1 and set(secrets[0]["data"]) == set(K8S_SECRETS)
    token_pods = [name for name, w in objects_of(rendered_overlays["gpu"], "Deployment").items()
                  for v in pod_spec(w).get("volumes", []) if "secret" in v
                  and v["secret"]["secretName"] == secrets[0]["metadata"]["name"]
                  and {"key": "api-token", "path": "azr_api_token"} in v["secret"]["items"]]
    assert set(token_pods) == {"proposer-api", "solver-api", "coordinator"}


def _is_ignored(path: Path) -> bool:
    """Whether a git-ignore file in the secret's directory excludes it (the secrets/ folder ignores everything)."""
    ignore = path.parent / ".gitignore"
    return ignore.is_file() and "*" in ignore.read_text().split()


def test_cluster_addons_target_existing_objects(rendered_overlays: dict[str, Any]) -> None:
    objects = rendered_overlays["gpu"]
    scaled = objects_of(objects, "ScaledObject")["executor"]
    assert scaled["spec"]["scaleTargetRef"]["name"] in objects_of(objects, "Deployment")
    trigger = scaled["spec"]["triggers"][0]
    assert trigger["type"] == "redis" and trigger["metadata"]["listName"] == "rq:queue:executor"
    assert trigger["metadata"]["address"].startswith("redis.azr.svc")
    monitor = objects_of(objects, "ServiceMonitor")["azr-apis"]
    selected = [s for s in objects_of(objects, "Service").values()
                if monitor["spec"]["selector"]["matchLabels"].items() <= s["metadata"].get("labels", {}).items()]
    assert {s["metadata"]["name"] for s in selected} == {"proposer-api", "solver-api"}
    assert all(any(p["name"] == monitor["spec"]["endpoints"][0]["port"] for p in s["spec"]["ports"]) for s in selected)
    assert not objects_of(rendered_overlays["cpu-dev"], "ScaledObject"), "cpu-dev must not need KEDA"


def test_cpu_dev_runs_without_gpus(rendered_overlays: dict[str, Any]) -> None:
    objects = rendered_overlays["cpu-dev"]
    for kind in WORKLOAD_KINDS:
        for workload in objects_of(objects, kind).values():
            for container in pod_spec(workload)["containers"]:
                assert "nvidia.com/gpu" not in json.dumps(container.get("resources", {}))
                assert not container["image"].startswith("lmsysorg/")
    settings = next(o for o in objects if o["kind"] == "ConfigMap" and o["metadata"]["name"].startswith("azr-settings"))
    assert settings["data"]["AZR_MODEL"] == "tiny" and settings["data"]["AZR_DEVICE"] == "cpu"


SCRAPED_ROLES = {"api", "coordinator", "trainer", "executor"}
"""Pod roles (label azr.io/role) that serve Prometheus metrics."""


def container_env(objects: list[dict[str, Any]], container: dict[str, Any]) -> dict[str, str]:
    """The environment a container sees: its ConfigMaps (envFrom), then its own `env` values on top."""
    config_maps = objects_of(objects, "ConfigMap")
    env: dict[str, str] = {}
    for source in container.get("envFrom", []):
        if "configMapRef" in source:
            env.update(config_maps[source["configMapRef"]["name"]]["data"])
    env.update({e["name"]: e["value"] for e in container.get("env", []) if "value" in e})
    return env


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_metrics_pod_is_scraped_on_a_port_its_container_serves(rendered_overlays: dict[str, Any],
                                                                     overlay: str) -> None:
    objects = rendered_overlays[overlay]
    scraped = set()
    for kind in WORKLOAD_KINDS:
        for name, workload in objects_of(objects, kind).items():
            template = workload["spec"]["template"]
            role = template["metadata"].get("labels", {}).get("azr.io/role")
            if role not in SCRAPED_ROLES:
                continue
            annotations = template["metadata"].get("annotations", {})
            assert annotations.get("prometheus.io/scrape") == "true", f"{overlay} {name}: no scrape annotation"
            assert annotations.get("prometheus.io/path") == "/metrics", f"{overlay} {name}"
            port = int(annotations["prometheus.io/port"])
            serving = [c for c in template["spec"]["containers"]
                       if port in {p["containerPort"] for p in c.get("ports", [])}]
            assert serving, f"{overlay} {name}: annotation port {port} is no container port"
            if role != "api":  # the process listens where its setting says: the same port
                setting = f"AZR_{role.upper()}_METRICS_PORT"
                assert container_env(objects, serving[0]).get(setting) == str(port), f"{overlay} {name}: {setting}"
            scraped.add(name)
    assert {"proposer-api", "solver-api", "coordinator", "trainer", "executor"} <= scraped


def test_pod_monitor_selects_the_pods_without_a_service(rendered_overlays: dict[str, Any]) -> None:
    objects = rendered_overlays["gpu"]
    monitor = objects_of(objects, "PodMonitor")["azr-workers"]
    (expression,) = monitor["spec"]["selector"]["matchExpressions"]
    assert expression["key"] == "azr.io/role" and expression["operator"] == "In"
    (endpoint,) = monitor["spec"]["podMetricsEndpoints"]
    selected = {name: workload for name, workload in objects_of(objects, "Deployment").items()
                if workload["spec"]["template"]["metadata"]["labels"].get("azr.io/role") in expression["values"]}
    assert {"coordinator", "trainer", "executor"} <= set(selected)
    for name, workload in selected.items():
        ports = [p for c in pod_spec(workload)["containers"] for p in c.get("ports", [])]
        assert any(p.get("name") == endpoint["port"] for p in ports), f"{name} has no port named {endpoint['port']}"
    assert not objects_of(rendered_overlays["cpu-dev"], "PodMonitor"), "cpu-dev must not need the operator"


def multinode_trainer(objects: list[dict[str, Any]]) -> tuple[dict[str, Any], dict[str, str]]:
    """The torchrun trainer StatefulSet of a rendered gpu-multinode overlay, and its `trainer-layout` ConfigMap data."""
    layout = next(o for o in objects if o["kind"] == "ConfigMap" and o["metadata"]["name"].startswith("trainer-layout"))
    return objects_of(objects, "StatefulSet")["trainer"], layout["data"]


def assert_torchrun_trainer(objects: list[dict[str, Any]], nodes: int, gpus: int) -> None:
    """The StatefulSet runs torchrun over `nodes` pods x `gpus` GPUs, every number from the one layout ConfigMap."""
    statefulset, layout = multinode_trainer(objects)
    assert (int(layout["TRAINER_NODES"]), int(layout["TRAINER_GPUS_PER_NODE"])) == (nodes, gpus)
    assert statefulset["spec"]["replicas"] == nodes
    container = pod_spec(statefulset)["containers"][0]
    assert container["resources"]["requests"]["nvidia.com/gpu"] == gpus
    assert container["resources"]["limits"]["nvidia.com/gpu"] == gpus
    env = {e["name"]: e for e in container["env"]}
    for variable in ("TRAINER_NODES", "TRAINER_GPUS_PER_NODE"):  # what $(VAR) in the args expands to
        ref = env[variable]["valueFrom"]["configMapKeyRef"]
        assert ref["name"].startswith("trainer-layout") and ref["key"] == variable


def test_gpu_multinode_trainer_is_torchrun_fsdp_over_a_statefulset(rendered_overlays: dict[str, Any]) -> None:
    objects = rendered_overlays["gpu-multinode"]
    assert "trainer" not in objects_of(objects, "Deployment"), "the one-GPU trainer must be replaced, not doubled"
    statefulset, _ = multinode_trainer(objects)
    assert_torchrun_trainer(objects, nodes=2, gpus=8)
    spec = statefulset["spec"]
    assert spec["podManagementPolicy"] == "Parallel", "the rendezvous needs every pod at once"
    container = pod_spec(statefulset)["containers"][0]
    assert container["command"] == ["torchrun"]
    args = container["args"]
    assert args[-3:] == ["-m", "azr", "trainer"]
    flags = dict(arg.split("=", 1) for arg in args if arg.startswith("--"))
    assert flags["--nnodes"] == "$(TRAINER_NODES)" and flags["--nproc_per_node"] == "$(TRAINER_GPUS_PER_NODE)"
    assert flags["--rdzv_backend"] == "c10d"
    host, _, port = flags["--rdzv_endpoint"].rpartition(":")
    assert host == f"trainer-0.{spec['serviceName']}" and int(port) in {p["containerPort"] for p in container["ports"]}
    headless = objects_of(objects, "Service")[spec["serviceName"]]
    assert headless["spec"]["clusterIP"] == "None" and headless["spec"]["publishNotReadyAddresses"] is True
    assert headless["spec"]["selector"].items() <= spec["template"]["metadata"]["labels"].items()
    assert int(port) in {p["port"] for p in headless["spec"]["ports"]}
    mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
    claims = {v["name"]: v.get("persistentVolumeClaim", {}).get("claimName") for v in pod_spec(statefulset)["volumes"]}
    assert claims[mounts["/var/lib/azr/runs"]] == "azr-state", "every rank must see the shared checkpoints"
    assert {e["name"]: e.get("value") for e in container["env"]}["AZR_DEVICE"] == "cuda"


def test_trainer_layout_is_set_in_one_place(rendered_overlays: dict[str, Any], k8s_tree: Path,
                                            kustomize: list[str]) -> None:
    """Editing the overlay's two layout values moves replicas, GPU requests and torchrun's arguments together."""
    import subprocess

    source = (k8s_tree / "overlays" / "gpu-multinode" / "kustomization.yaml").read_text()
    assert "TRAINER_NODES=2" in source and "TRAINER_GPUS_PER_NODE=8" in source
    variant = k8s_tree / "overlays" / "gpu-multinode-variant"
    variant.mkdir(exist_ok=True)
    (variant / "kustomization.yaml").write_text(
        source.replace("TRAINER_NODES=2", "TRAINER_NODES=3")
        .replace("TRAINER_GPUS_PER_NODE=8", "TRAINER_GPUS_PER_NODE=4"))
    result = subprocess.run([*kustomize, str(variant)], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert_torchrun_trainer([d for d in yaml.safe_load_all(result.stdout) if d], nodes=3, gpus=4)
