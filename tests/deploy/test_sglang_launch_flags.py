"""The GPU services' SGLang launch flags, in docker-compose.yml (gpu profile) and the Kubernetes GPU overlays, parsed
with the server arguments of the SGLang version they pin (sglang_server_args.py: 0.5.23, read from its wheel): every
flag exists, every value is one SGLang accepts, and the flags the deployment relies on are there: bf16 serving
(`--dtype auto` serves fp32 checkpoints in fp16), the admin key from the secret file (the trainer sends it; read by the
shell that starts the server, so it is in no compose file, pod spec or environment), weight version 0 for the base
model."""

from __future__ import annotations

import argparse
from typing import Any

import pytest
from deploy_tools import K8S_SECRETS, active_services, objects_of
from sglang_server_args import SGLANG_VERSION, parse_launch_args
from throwaway_servers import REPO_ROOT

from services.settings import settings_fields

INFERENCE_SERVICES = ("sglang-propose", "sglang-solve")
GPU_OVERLAYS = ("gpu", "gpu-multinode")


def pinned_tag(image: str) -> str:
    """The tag of an `lmsysorg/sglang:TAG` image reference."""
    repository, _, tag = image.rpartition(":")
    assert repository == "lmsysorg/sglang", image
    return tag


def sglang_container(objects: list[dict[str, Any]], name: str) -> dict[str, Any]:
    """The `sglang` container of a rendered SGLang StatefulSet."""
    spec = objects_of(objects, "StatefulSet")[name]["spec"]["template"]["spec"]
    return next(c for c in spec["containers"] if c["name"] == "sglang")


ADMIN_KEY_FILE = "/run/secrets/azr_sglang_admin_api_key"
LAUNCH_SCRIPT = f'exec python3 -m sglang.launch_server "$@" --admin-api-key "$(cat {ADMIN_KEY_FILE})"'
"""What starts every SGLang server: its flags, then the admin key read from the secret file."""


def launch_argv(entrypoint: list[str], args: list[str]) -> list[str]:
    """The server's arguments as the launch script passes them (the key shown as the file it is read from); a
    compose or Kubernetes `$$` is the escaped `$` the shell sees."""
    assert entrypoint[:2] == ["/bin/sh", "-c"] and entrypoint[2].replace("$$", "$") == LAUNCH_SCRIPT, entrypoint
    return [*args, "--admin-api-key", ADMIN_KEY_FILE]


def secret_files(objects: list[dict[str, Any]], workload: dict[str, Any], container: dict[str, Any]) -> set[str]:
    """(key of the generated secret) the container sees as files under /run/secrets."""
    spec = workload["spec"]["template"]["spec"]
    mounted = {m["name"] for m in container.get("volumeMounts", []) if m["mountPath"] == "/run/secrets"}
    found = set()
    for volume in spec.get("volumes", []):
        if volume["name"] in mounted and "secret" in volume:
            assert volume["secret"]["secretName"] == generated_secret(objects)
            found |= {item["key"] for item in volume["secret"]["items"]}
    return found


def generated_secret(objects: list[dict[str, Any]]) -> str:
    """The (hashed) name of the azr-secrets Secret in a rendered overlay."""
    (secret,) = [o["metadata"]["name"] for o in objects if o["kind"] == "Secret"]
    assert secret.startswith("azr-secrets")
    return secret


def assert_reference_flags(parsed: argparse.Namespace, admin_key: str) -> None:
    """The flags every SGLang server of ours must run with."""
    assert parsed.dtype == "bfloat16"
    assert parsed.admin_api_key == admin_key
    assert parsed.api_key is None, "--api-key would lock /generate too, and the APIs send no key"
    assert parsed.weight_version == "0", "the base model is policy version 0"
    assert parsed.model_path == "/var/lib/azr/models/current"
    assert (parsed.host, parsed.port) == ("0.0.0.0", "30000")


def test_the_pinned_parser_refuses_what_sglang_refuses() -> None:
    good = ["--model-path", "/m", "--dtype", "bfloat16", "--admin-api-key", "k", "--skip-server-warmup"]
    assert parse_launch_args(good).dtype == "bfloat16"
    for bad in (["--model-path", "/m", "--dtype", "bf16"],  # not one of the choices
                ["--model-path", "/m", "--dtypes", "bfloat16"],  # no such flag
                ["--model-path", "/m", "--admin-key", "k"],  # no such flag (and no abbreviation)
                ["--model-path", "/m", "--skip-server-warmup", "true"],  # a switch takes no value
                ["--dtype", "bfloat16"]):  # --model-path is required
        with pytest.raises(ValueError):
            parse_launch_args(bad)


def test_compose_and_kubernetes_pin_the_version_the_flags_were_read_from(compose_configs: dict[str, Any],
                                                                         rendered_overlays: dict[str, Any]) -> None:
    tags = {pinned_tag(active_services(compose_configs["gpu"], "gpu")[name]["image"]) for name in INFERENCE_SERVICES}
    for overlay in GPU_OVERLAYS:
        tags |= {pinned_tag(sglang_container(rendered_overlays[overlay], name)["image"])
                 for name in INFERENCE_SERVICES}
    env_example = (REPO_ROOT / ".env.example").read_text()
    tags.add(next(line.split("=", 1)[1].rpartition(":")[2] for line in env_example.splitlines()
                  if line.startswith("SGLANG_IMAGE=")))
    assert tags == {f"v{SGLANG_VERSION}"}


@pytest.mark.parametrize("name", INFERENCE_SERVICES)
def test_compose_sglang_flags(compose_configs: dict[str, Any], name: str) -> None:
    service = active_services(compose_configs["gpu"], "gpu")[name]
    assert_reference_flags(parse_launch_args(launch_argv(service["entrypoint"], service["command"])), ADMIN_KEY_FILE)
    held = {e["source"] if isinstance(e, dict) else e for e in service["secrets"]}
    assert held == {"azr_sglang_admin_api_key"}


@pytest.mark.parametrize("overlay", GPU_OVERLAYS)
@pytest.mark.parametrize("name", INFERENCE_SERVICES)
def test_kubernetes_sglang_flags(rendered_overlays: dict[str, Any], overlay: str, name: str) -> None:
    objects = rendered_overlays[overlay]
    container = sglang_container(objects, name)
    parsed = parse_launch_args(launch_argv(container["command"], container["args"]))
    assert_reference_flags(parsed, ADMIN_KEY_FILE)
    workload = objects_of(objects, "StatefulSet")[name]
    assert secret_files(objects, workload, container) == {"sglang-admin-api-key"}
    assert not any("valueFrom" in entry for entry in container.get("env", []))


def test_the_trainer_holds_the_admin_key_its_servers_require(compose_configs: dict[str, Any],
                                                             rendered_overlays: dict[str, Any]) -> None:
    assert "sglang_admin_api_key" in settings_fields()  # AZR_SGLANG_ADMIN_API_KEY is a setting the trainer reads
    for profile in ("gpu", "cpu"):
        trainer = next(s for s in active_services(compose_configs[profile], profile).values()
                       if s.get("command") == ["trainer"])
        assert "azr_sglang_admin_api_key" in {e["source"] if isinstance(e, dict) else e for e in trainer["secrets"]}
        assert "AZR_SGLANG_ADMIN_API_KEY" not in trainer["environment"]
    assert "sglang-admin-api-key" in K8S_SECRETS
    for overlay in ("gpu", "gpu-multinode", "cpu-dev"):
        objects = rendered_overlays[overlay]
        trainer = (objects_of(objects, "Deployment") | objects_of(objects, "StatefulSet"))["trainer"]
        container = trainer["spec"]["template"]["spec"]["containers"][0]
        assert secret_files(objects, trainer, container) == {"sglang-admin-api-key", "redis-password"}
