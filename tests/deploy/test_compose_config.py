"""docker-compose.yml as compose resolves it, for both profiles: the right services start, in the right order, with
the reference notes' SGLang launch flags, GPU reservations, health checks and shared checkpoint volume."""

from __future__ import annotations

from typing import Any

import pytest
import yaml
from deploy_tools import COMPOSE_SECRETS, PROFILES, REQUIRED_COMPOSE_ENV, active_services, run_compose_config

INFERENCE_NAMES = ("sglang-propose", "sglang-solve")
APP_SERVICES = {"migrate", "proposer-api", "solver-api", "executor", "coordinator"}


def network_names(name: str, service: dict[str, Any]) -> set[str]:
    """The DNS names a service answers to on the default network: its own and its aliases."""
    networks = service.get("networks") or {}
    aliases = (networks.get("default") or {}).get("aliases", []) if isinstance(networks, dict) else []
    return {name, *aliases}


def mounts(service: dict[str, Any]) -> set[tuple[str, str]]:
    """(source, target) of each mount; compose v2 prints long-form dicts, v1 `source:target[:mode]` strings."""
    pairs = set()
    for volume in service.get("volumes", []):
        if isinstance(volume, dict):
            pairs.add((str(volume.get("source")), str(volume["target"])))
        else:
            source, target = str(volume).split(":")[:2]
            pairs.add((source, target))
    return pairs


def gpu_reservation(service: dict[str, Any]) -> list[dict[str, Any]]:
    """The NVIDIA device reservations of a service (empty without)."""
    devices = service.get("deploy", {}).get("resources", {}).get("reservations", {}).get("devices", [])
    return [device for device in devices if "gpu" in device.get("capabilities", [])]


@pytest.mark.parametrize("profile", PROFILES)
def test_profile_starts_the_whole_pipeline(compose_configs: dict[str, Any], profile: str) -> None:
    services = active_services(compose_configs[profile], profile)
    assert APP_SERVICES | {"redis", "postgres"} <= set(services)
    answering = set().union(*(network_names(name, service) for name, service in services.items()))
    assert set(INFERENCE_NAMES) <= answering, f"{profile}: nothing answers as {INFERENCE_NAMES}"
    trainers = [name for name, service in services.items() if service.get("command") == ["trainer"]]
    assert len(trainers) == 1, f"{profile}: expected exactly one trainer, got {trainers}"


@pytest.mark.parametrize("profile", PROFILES)
def test_dependencies_exist_in_the_profile_and_wait_for_health(compose_configs: dict[str, Any], profile: str) -> None:
    services = active_services(compose_configs[profile], profile)
    for name, service in services.items():
        for dependency, condition in (service.get("depends_on") or {}).items():
            assert dependency in services, f"{profile}: {name} depends on {dependency}, not started in this profile"
            if "healthcheck" in services[dependency]:
                assert condition["condition"] == "service_healthy", f"{name} -> {dependency}: {condition}"
    assert services["migrate"]["command"] == ["db", "upgrade"]
    for name in ("proposer-api", "solver-api"):
        assert services[name]["depends_on"]["migrate"]["condition"] == "service_completed_successfully", name
    assert services["coordinator"]["depends_on"]["proposer-api"]["condition"] == "service_healthy"


def test_gpu_profile_runs_pinned_sglang_with_reference_flags(compose_configs: dict[str, Any]) -> None:
    services = active_services(compose_configs["gpu"], "gpu")
    for name in INFERENCE_NAMES:
        sglang = services[name]
        image, _, tag = sglang["image"].rpartition(":")
        assert image == "lmsysorg/sglang" and tag.startswith("v") and tag != "latest", sglang["image"]
        entrypoint = " ".join(sglang["entrypoint"])
        assert "python3 -m sglang.launch_server" in entrypoint  # the admin key appended from its secret file
        assert "--admin-api-key" in entrypoint and "/run/secrets/azr_sglang_admin_api_key" in entrypoint
        command = sglang["command"]
        assert command[command.index("--host") + 1] == "0.0.0.0"
        assert command[command.index("--port") + 1] == "30000"
        assert command[command.index("--model-path") + 1].startswith("/var/lib/azr/models/")
        assert "/health" in " ".join(sglang["healthcheck"]["test"])
        assert gpu_reservation(sglang) and gpu_reservation(sglang)[0]["driver"] == "nvidia"
        assert "ipc" not in sglang and sglang["shm_size"], "a large /dev/shm, not the host's IPC namespace"
        assert services[name]["depends_on"]["model-prep"]["condition"] == "service_completed_successfully"
    trainer = services["trainer"]
    assert gpu_reservation(trainer)
    assert trainer["environment"]["AZR_DEVICE"] == "cuda"
    assert trainer["depends_on"]["sglang-propose"]["condition"] == "service_healthy"


def test_cpu_profile_needs_no_gpu(compose_configs: dict[str, Any]) -> None:
    services = active_services(compose_configs["cpu"], "cpu")
    assert not any(gpu_reservation(service) for service in services.values())
    assert not any(service["image"].startswith("lmsysorg/") for service in services.values())
    inference = [s for s in services.values() if s.get("command", [])[:2] == ["serve", "inference"]]
    assert len(inference) == 2
    trainer = services["trainer-cpu"]
    assert trainer["environment"]["AZR_DEVICE"] == "cpu"


@pytest.mark.parametrize("profile", PROFILES)
def test_trainer_and_inference_share_the_checkpoint_volume(compose_configs: dict[str, Any], profile: str) -> None:
    services = active_services(compose_configs[profile], profile)
    trainer = next(s for s in services.values() if s.get("command") == ["trainer"])
    run_root = trainer["environment"]["AZR_RUN_ROOT"]

    shared = {mount for mount in mounts(trainer) if mount[1] == run_root}
    assert shared, f"trainer does not mount a volume at its run root {run_root}"
    for name, service in services.items():
        if network_names(name, service) & set(INFERENCE_NAMES):
            assert shared <= mounts(service), f"{name} does not see the trainer's checkpoints at {run_root}"
    urls = trainer["environment"]["AZR_SGLANG_URLS"]
    assert all(f"http://{name}:30000" in urls for name in INFERENCE_NAMES)


@pytest.mark.parametrize("profile", PROFILES)
def test_executor_is_scalable_and_uses_the_docker_socket(compose_configs: dict[str, Any], profile: str) -> None:
    executor = active_services(compose_configs[profile], profile)["executor"]
    assert "container_name" not in executor and not executor.get("ports"), "--scale needs no fixed name or port"
    assert executor["environment"]["AZR_EXECUTOR_BACKEND"] == "docker"
    assert ("/var/run/docker.sock", "/var/run/docker.sock") in mounts(executor)


@pytest.mark.parametrize("profile", PROFILES)
def test_only_loopback_ports_are_published(compose_configs: dict[str, Any], profile: str) -> None:
    for name, service in active_services(compose_configs[profile], profile).items():
        for port in service.get("ports", []):
            host_ip = port.get("host_ip") if isinstance(port, dict) else str(port).split(":")[0]
            assert host_ip == "127.0.0.1", f"{name} publishes {port} beyond loopback"


@pytest.mark.parametrize("missing", sorted(REQUIRED_COMPOSE_ENV))
def test_required_settings_have_no_default(compose: list[str], compose_env: dict[str, str], missing: str) -> None:
    """The Docker socket's group has no default (it used to default to root's group 0)."""
    env = {key: value for key, value in compose_env.items() if key != missing}
    result = run_compose_config(compose, "cpu", env)
    assert result.returncode != 0
    assert f"set {missing}" in result.stderr, result.stderr


@pytest.mark.parametrize("profile", PROFILES)
def test_every_secret_is_a_file_for_the_services_that_use_it(compose_configs: dict[str, Any], profile: str) -> None:
    """Secrets come from files (./secrets, AZR_SECRETS_DIR), each mounted only where it is used; no value of one is
    in the resolved configuration (an environment, a command line, `docker inspect`)."""
    config = compose_configs[profile]
    assert set(config["secrets"]) == set(COMPOSE_SECRETS)
    assert all(entry["file"].endswith(f"/{name}") for name, entry in config["secrets"].items())
    services = active_services(config, profile)
    holders = {name: {e["source"] if isinstance(e, dict) else e for e in s.get("secrets", [])}
               for name, s in services.items()}
    assert holders["proposer-api"] == {"azr_api_token", "azr_database_password", "azr_redis_password"}
    assert holders["solver-api"] == {"azr_api_token", "azr_redis_password"}
    assert holders["executor"] == {"azr_redis_password"}
    assert holders["model-prep"] == set()
    text = yaml.safe_dump(config)
    assert not any(value in text for value in COMPOSE_SECRETS.values())
    for name in ("proposer-api", "solver-api", "coordinator"):
        assert services[name]["environment"]["AZR_PROFILE"] == "distributed", name


def container_ports(service: dict[str, Any]) -> set[int]:
    """Container ports a service publishes; compose v2 prints dicts (`target`), v1 `host_ip:host:container/proto`."""
    ports = set()
    for port in service.get("ports", []):
        if isinstance(port, dict):
            ports.add(int(port["target"]))
        else:
            ports.add(int(str(port).split(":")[-1].split("/")[0]))
    return ports


@pytest.mark.parametrize("profile", PROFILES)
def test_metrics_endpoints_listen_where_they_are_published(compose_configs: dict[str, Any], profile: str) -> None:
    """The coordinator and trainer publish (loopback) the port their metrics setting names; executor workers, which
    scale, expose theirs on the project network only."""
    services = active_services(compose_configs[profile], profile)
    trainer = next(s for s in services.values() if s.get("command") == ["trainer"])
    for role, service in (("COORDINATOR", services["coordinator"]), ("TRAINER", trainer)):
        port = int(service["environment"][f"AZR_{role}_METRICS_PORT"])
        assert port > 0 and port in container_ports(service), f"{role}: metrics port {port} is not published"
    executor = services["executor"]
    port = int(executor["environment"]["AZR_EXECUTOR_METRICS_PORT"])
    assert port > 0 and str(port) in [str(p) for p in executor.get("expose", [])]


@pytest.mark.parametrize(("extra_env", "ranks", "gpus"), [
    ({}, "1", "0"), ({"AZR_TRAINER_GPUS": "2", "AZR_GPU_TRAINER": "2,3"}, "2", "2,3")])
def test_gpu_trainer_is_torchrun_with_one_rank_per_listed_gpu(compose: list[str], compose_env: dict[str, str],
                                                              extra_env: dict[str, str], ranks: str, gpus: str) -> None:
    result = run_compose_config(compose, "gpu", {**compose_env, **extra_env})
    assert result.returncode == 0, result.stderr
    trainer = yaml.safe_load(result.stdout)["services"]["trainer"]
    assert trainer["entrypoint"] == ["torchrun", "--standalone", f"--nproc_per_node={ranks}", "-m", "azr"]
    assert trainer["command"] == ["trainer"]
    assert trainer["environment"]["CUDA_VISIBLE_DEVICES"] == gpus
    assert [str(d.get("count")) for d in gpu_reservation(trainer)] == ["all"]  # compose 1.29 takes no interpolated int
    assert "ipc" not in trainer and trainer["shm_size"], "NCCL's shared memory: a large /dev/shm, not `ipc: host`"


def command_option(command: list[str], flag: str) -> str:
    """The value after `flag` in an argv list (AssertionError when absent)."""
    assert flag in command, f"{flag} missing from {command}"
    return command[command.index(flag) + 1]


@pytest.mark.parametrize("profile", PROFILES)
def test_redis_requires_its_password_and_keeps_an_append_only_file(compose_configs: dict[str, Any],
                                                                   profile: str) -> None:
    """The episode stream is the trainer's delivery log: AOF on, in a volume, so unacknowledged episodes survive a
    Redis restart; and nothing reaches Redis without the password, which is in its secret file only: Redis writes
    it into a config file (never on its command line), every client reads its own copy (never in a URL or the
    environment)."""
    services = active_services(compose_configs[profile], profile)
    server = services["redis"]
    script = " ".join(server["command"])
    assert "/run/secrets/azr_redis_password" in script and "requirepass" in script
    assert "--requirepass" not in script, "the password would be on redis-server's command line"
    assert "--appendonly yes" in script
    assert any(target == "/data" and not source.startswith("/") for source, target in mounts(server)), \
        "the append-only file must live in a named volume"
    assert "REDISCLI_AUTH" not in (server.get("environment") or {})
    assert "/run/secrets/azr_redis_password" in " ".join(server["healthcheck"]["test"])
    clients = {name for name, s in services.items() if "AZR_REDIS_URL" in (s.get("environment") or {})}
    assert {"proposer-api", "solver-api", "executor", "coordinator"} <= clients
    for name in clients:
        url = services[name]["environment"]["AZR_REDIS_URL"]
        assert "@" not in url, f"{name}: a password in {url}"
        if name not in ("migrate", "model-prep", "inference-propose", "inference-solve"):
            held = {e["source"] if isinstance(e, dict) else e for e in services[name].get("secrets", [])}
            assert "azr_redis_password" in held, name


@pytest.mark.parametrize("profile", PROFILES)
def test_stores_restart_after_a_crash(compose_configs: dict[str, Any], profile: str) -> None:
    services = active_services(compose_configs[profile], profile)
    for name in ("redis", "postgres"):
        assert services[name].get("restart") in ("always", "unless-stopped"), f"{name}: {services[name].get('restart')}"


def test_the_two_sglang_servers_start_one_after_the_other(compose_configs: dict[str, Any]) -> None:
    """Both default to GPU 0 and size their memory pool from what is free at start: never at the same time."""
    services = active_services(compose_configs["gpu"], "gpu")
    assert services["sglang-solve"]["depends_on"]["sglang-propose"]["condition"] == "service_healthy"
    assert "sglang-solve" not in (services["sglang-propose"].get("depends_on") or {})


@pytest.mark.parametrize("profile", PROFILES)
def test_the_model_is_prepared_once_before_anything_reads_it(compose_configs: dict[str, Any], profile: str) -> None:
    services = active_services(compose_configs[profile], profile)
    assert "model-prep" in services, f"{profile}: nothing prepares the model the APIs read"
    readers = [name for name, service in services.items()
               if name in ("proposer-api", "solver-api") or network_names(name, service) & set(INFERENCE_NAMES)]
    assert len(readers) == 4
    for name in readers:
        assert services[name]["depends_on"]["model-prep"]["condition"] == "service_completed_successfully", name


@pytest.mark.parametrize("profile", PROFILES)
def test_every_inference_server_requires_the_admin_key(compose_configs: dict[str, Any], profile: str) -> None:
    """Whatever answers as sglang-propose / sglang-solve guards its control endpoints with the admin key from its
    secret file: SGLang gets it as --admin-api-key read by the shell that starts it (a flag is its only way),
    `azr serve inference` reads the file itself; neither has it in its environment or the compose file."""
    servers = {name: service for name, service in active_services(compose_configs[profile], profile).items()
               if network_names(name, service) & set(INFERENCE_NAMES)}
    assert len(servers) == len(INFERENCE_NAMES), f"{profile}: inference servers {sorted(servers)}"
    for name, service in servers.items():
        held = {e["source"] if isinstance(e, dict) else e for e in service.get("secrets", [])}
        assert held == {"azr_sglang_admin_api_key"}, name
        assert "AZR_SGLANG_ADMIN_API_KEY" not in (service.get("environment") or {}), name
        command = [str(part) for part in service.get("command") or []]
        if "sglang.launch_server" in " ".join(service.get("entrypoint") or []):
            assert "/run/secrets/azr_sglang_admin_api_key" in " ".join(service["entrypoint"]), name
        else:
            assert command[:2] == ["serve", "inference"], f"{name}: an inference server of an unknown kind"
            assert not any("admin" in part for part in command), f"{name}: the admin key is on the command line"
