"""The proposer and solver APIs run on a read-only root filesystem with the shared model volume mounted read-only,
and with the same mounts in Kubernetes and in Compose: they load only the served model's tokenizer from that volume
(services/inference/prepared_model.py), so nothing is converted or written in an API container."""

from __future__ import annotations

from typing import Any

import pytest
from deploy_tools import OVERLAYS, PROFILES, active_services, objects_of

API_NAMES = ("proposer-api", "solver-api")
MODEL_CACHE = "/var/lib/azr/models"


def compose_mounts(service: dict[str, Any]) -> dict[str, bool]:
    """mount path -> read-only, for a compose service's volumes and tmpfs (v1 prints strings, v2 dicts)."""
    found: dict[str, bool] = {}
    for volume in service.get("volumes", []):
        if isinstance(volume, dict):
            found[volume["target"]] = bool(volume.get("read_only"))
        else:
            parts = str(volume).split(":")
            found[parts[1]] = len(parts) > 2 and "ro" in parts[2].split(",")
    tmpfs = service.get("tmpfs", [])
    for entry in [tmpfs] if isinstance(tmpfs, str) else tmpfs:
        found[str(entry).split(":")[0]] = False
    if service.get("secrets"):  # compose mounts them read-only at /run/secrets/<name>
        found["/run/secrets"] = True
    return found


def pod_mounts(workload: dict[str, Any]) -> dict[str, bool]:
    """mount path -> read-only, for a Deployment's first container (a mount is read-only when the mount or its
    persistentVolumeClaim says so)."""
    spec = workload["spec"]["template"]["spec"]
    claims_read_only = {v["name"]: v.get("persistentVolumeClaim", {}).get("readOnly", False) for v in spec["volumes"]}
    return {m["mountPath"]: bool(m.get("readOnly")) or claims_read_only[m["name"]]
            for m in spec["containers"][0]["volumeMounts"]}


@pytest.mark.parametrize("profile", PROFILES)
@pytest.mark.parametrize("name", API_NAMES)
def test_compose_apis_run_read_only_with_the_model_volume_read_only(compose_configs: dict[str, Any], profile: str,
                                                                    name: str) -> None:
    service = active_services(compose_configs[profile], profile)[name]
    assert service.get("read_only") is True
    mounts = compose_mounts(service)
    assert mounts.get(MODEL_CACHE) is True, f"{name}: the model volume must be mounted read-only at {MODEL_CACHE}"
    assert service["environment"]["AZR_MODEL_CACHE"] == MODEL_CACHE
    volume_names = [str(v.get("source") if isinstance(v, dict) else v).split(":")[0] for v in service["volumes"]]
    assert "azr-models" in [n.rpartition("_")[2] for n in volume_names], volume_names  # v1 prefixes the project


@pytest.mark.parametrize("overlay", OVERLAYS)
@pytest.mark.parametrize("name", API_NAMES)
def test_kubernetes_apis_read_the_model_volume_read_only(rendered_overlays: dict[str, Any], overlay: str,
                                                         name: str) -> None:
    workload = objects_of(rendered_overlays[overlay], "Deployment")[name]
    spec = workload["spec"]["template"]["spec"]
    container = spec["containers"][0]
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    mount = next(m for m in container["volumeMounts"] if m["mountPath"] == MODEL_CACHE)
    claim = next(v for v in spec["volumes"] if v["name"] == mount["name"])["persistentVolumeClaim"]
    assert claim == {"claimName": "azr-state", "readOnly": True} and mount["subPath"] == "models"
    assert pod_mounts(workload)[MODEL_CACHE] is True
    # The init container waits for the tokenizer the inference side prepares, reading only.
    (waiter,) = spec["initContainers"]
    assert "wait_for_prepared_model" in " ".join(waiter["args"])
    assert [m for m in waiter["volumeMounts"] if m["mountPath"] == MODEL_CACHE and m.get("readOnly")]
    assert waiter["securityContext"]["readOnlyRootFilesystem"] is True


@pytest.mark.parametrize("name", API_NAMES)
def test_compose_gives_the_apis_the_mounts_of_their_pods(compose_configs: dict[str, Any],
                                                         rendered_overlays: dict[str, Any], name: str) -> None:
    pod = pod_mounts(objects_of(rendered_overlays["gpu"], "Deployment")[name])
    for profile in PROFILES:
        assert compose_mounts(active_services(compose_configs[profile], profile)[name]) == pod, profile
