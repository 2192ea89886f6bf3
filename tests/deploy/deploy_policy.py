"""The least-privilege policy of the deployments (issue 37), as code: `compose_violations` reads a resolved
docker-compose configuration, `k8s_violations` a rendered overlay; each returns one line per rule a service breaks
(empty: the policy holds). test_deploy_policy.py runs both on every profile and overlay, and on copies with a planted
violation of each rule, which they must catch.

Rules, both deployments:
- each service or pod gets only the secrets it uses (NEEDED_SECRETS), as files: none in an environment variable
  (a name that looks like a secret, or any value equal to one), on a command line, or in a probe;
- no capability (cap_drop ALL / capabilities.drop [ALL]), no privilege gain (no-new-privileges /
  allowPrivilegeEscalation false), a memory limit, and a read-only root unless the service is in WRITABLE_ROOT
  with its reason;
- Compose: a pids limit, no `ipc: host`, `pid: host`, `network_mode: host` or `privileged`, ports on loopback only,
  the Docker socket in the executor only and never with group 0;
- Kubernetes: no service-account token, a seccomp profile (Unconfined only for the executor, whose bubblewrap needs
  unshare(2)), non-root except RUNS_AS_ROOT, a default-deny NetworkPolicy, the SGLang servers reachable only from
  the APIs, the coordinator and the trainer, port 29400 only from trainer pods, and the images built here pinned by
  digest in the production overlays.
"""

from __future__ import annotations

import re
from typing import Any

SECRET_FILES = {"api-token": "azr_api_token", "postgres-password": "azr_database_password",
                "redis-password": "azr_redis_password", "sglang-admin-api-key": "azr_sglang_admin_api_key"}
"""Kubernetes secret keys and the file names (= Compose secret names) the settings read them from."""

NEEDED_SECRETS: dict[str, frozenset[str]] = {
    "redis": frozenset({"azr_redis_password"}),
    "postgres": frozenset({"azr_database_password"}),
    "migrate": frozenset({"azr_database_password"}),
    "azr-migrate": frozenset({"azr_database_password"}),
    "model-prep": frozenset(),
    "proposer-api": frozenset({"azr_api_token", "azr_database_password", "azr_redis_password"}),
    "solver-api": frozenset({"azr_api_token", "azr_redis_password"}),
    "executor": frozenset({"azr_redis_password"}),
    "coordinator": frozenset({"azr_api_token", "azr_database_password", "azr_redis_password"}),
    "trainer": frozenset({"azr_redis_password", "azr_sglang_admin_api_key"}),
    "trainer-cpu": frozenset({"azr_redis_password", "azr_sglang_admin_api_key"}),
    "sglang-propose": frozenset({"azr_sglang_admin_api_key"}),
    "sglang-solve": frozenset({"azr_sglang_admin_api_key"}),
    "inference-propose": frozenset({"azr_sglang_admin_api_key"}),
    "inference-solve": frozenset({"azr_sglang_admin_api_key"}),
}
"""The secrets each service or workload may hold: what its process reads, nothing more."""

WRITABLE_ROOT = {"sglang-propose": "the upstream SGLang image writes its caches under its home",
                 "sglang-solve": "the upstream SGLang image writes its caches under its home"}
"""Services (Compose) or containers named `sglang` (Kubernetes) that keep a writable root, and why."""
RUNS_AS_ROOT = {"sglang": "the upstream SGLang image expects root (not run on a GPU here to try otherwise)"}
"""Kubernetes containers that may run as root, and why."""
OUR_IMAGES = ("azr",)
"""Images built from this repository, by their kustomize name: pinned by digest in the production overlays."""
PRODUCTION_OVERLAYS = ("gpu", "gpu-multinode")
SECRET_NAME = re.compile(r"(PASSWORD|_TOKEN|SECRET|API_KEY|REDISCLI_AUTH)$", re.IGNORECASE)
VARIABLE_REFERENCE = re.compile(r"(?<!\$)\$\(([A-Za-z_][A-Za-z0-9_]*)\)")
"""`$(NAME)` in a Kubernetes command or args: the variable's value on the command line (`$$(...)` is escaped)."""
WORKLOAD_KINDS = ("Deployment", "StatefulSet", "Job")
SGLANG_CLIENTS = {"proposer-api", "solver-api", "coordinator", "trainer"}


def _secret_env(name: str) -> bool:
    """An environment variable that would hold a secret (one naming a secret file, `*_FILE`, is fine)."""
    return bool(SECRET_NAME.search(name)) and not name.endswith("_FILE")


def _texts(value: Any) -> list[str]:
    """Every string inside a (nested) value."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [text for item in value.values() for text in _texts(item)]
    if isinstance(value, list):
        return [text for item in value for text in _texts(item)]
    return []


# ------------------------------------------------------------------------------------------------ compose


def compose_violations(config: dict[str, Any], secret_values: dict[str, str]) -> list[str]:
    """What breaks the policy in a resolved compose configuration; `secret_values`: secret name -> its content
    (to find a secret copied into an environment, a command or a probe)."""
    found = []
    for name, service in config["services"].items():
        def flag(message: str, service_name: str = name) -> None:
            found.append(f"{service_name}: {message}")

        env = service.get("environment") or {}
        env = env if isinstance(env, dict) else dict(str(item).partition("=")[::2] for item in env)
        for key, value in env.items():
            if _secret_env(key):
                flag(f"secret-like variable {key} in its environment (use a secret file)")
            if value is not None and str(value) in secret_values.values():
                flag(f"a secret's value in its environment ({key})")
        visible = _texts([service.get("command"), service.get("entrypoint"), service.get("healthcheck"), env])
        for secret, value in secret_values.items():
            if any(value in text for text in visible):
                flag(f"the value of secret {secret} in its command, entrypoint, probe or environment")
        held = {entry["source"] if isinstance(entry, dict) else str(entry) for entry in service.get("secrets", [])}
        extra = held - NEEDED_SECRETS.get(name, frozenset())
        if extra:
            flag(f"secrets it does not use: {sorted(extra)}")
        if "ALL" not in (service.get("cap_drop") or []):
            flag("capabilities not dropped (cap_drop: [ALL])")
        if not any(str(opt).startswith("no-new-privileges") and not str(opt).endswith("false")
                   for opt in service.get("security_opt") or []):
            flag("no no-new-privileges")
        for key in ("mem_limit", "pids_limit"):
            if not service.get(key):
                flag(f"no {key}")
        if not service.get("read_only") and name not in WRITABLE_ROOT:
            flag("a writable root filesystem")
        for key, bad in (("ipc", "host"), ("pid", "host"), ("network_mode", "host"), ("privileged", True)):
            if service.get(key) == bad:
                flag(f"{key}: {bad}")
        for port in service.get("ports", []):
            host_ip = port.get("host_ip") if isinstance(port, dict) else str(port).split(":")[0]
            if host_ip != "127.0.0.1":
                flag(f"publishes {port} beyond loopback")
        mounts = [str(v.get("source") if isinstance(v, dict) else v) for v in service.get("volumes", [])]
        if any("docker.sock" in mount for mount in mounts):
            if name != "executor":
                flag("holds the Docker socket")
            if any(str(group) == "0" for group in service.get("group_add", [])):
                flag("joins group 0 for the Docker socket")
    return found


# ------------------------------------------------------------------------------------------------ kubernetes


def _workloads(objects: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {obj["metadata"]["name"]: obj for obj in objects if obj["kind"] in WORKLOAD_KINDS}


def _selects(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    """Whether a label selector (matchLabels / matchExpressions In) selects `labels`; {} selects everything."""
    if any(labels.get(key) != value for key, value in selector.get("matchLabels", {}).items()):
        return False
    for expression in selector.get("matchExpressions", []):
        if expression["operator"] != "In" or labels.get(expression["key"]) not in expression["values"]:
            return False
    return True


def _admitted(objects: list[dict[str, Any]], target: dict[str, str], port: int) -> list[str]:
    """Names of the workloads (of this namespace) some NetworkPolicy lets reach pods labelled `target` on `port`, or
    ['<any>'] when a rule admits peers beyond the namespace's own workloads (a namespace selector, no `from`)."""
    admitted: set[str] = set()
    workloads = _workloads(objects)
    for policy in (o for o in objects if o["kind"] == "NetworkPolicy"):
        spec = policy["spec"]
        if "Ingress" not in spec.get("policyTypes", []) or not _selects(spec["podSelector"], target):
            continue
        for rule in spec.get("ingress", []):
            ports = rule.get("ports")
            if ports is not None and not any(p.get("port") == port for p in ports):
                continue
            peers = rule.get("from")
            if not peers:
                return ["<any>"]
            for peer in peers:
                if "namespaceSelector" in peer or "ipBlock" in peer or "podSelector" not in peer:
                    namespace = peer.get("namespaceSelector", {}).get("matchLabels", {})
                    if namespace.get("kubernetes.io/metadata.name") in ("monitoring", "keda") and \
                            port not in (30000, 29400):
                        continue  # Prometheus / KEDA: named namespaces, never to SGLang or the rendezvous
                    return ["<any>"]
                admitted |= {name for name, w in workloads.items()
                             if _selects(peer["podSelector"], w["spec"]["template"]["metadata"].get("labels", {}))}
    return sorted(admitted)


def k8s_violations(objects: list[dict[str, Any]], overlay: str) -> list[str]:
    """What breaks the policy in one rendered overlay."""
    found = []
    secrets = [o for o in objects if o["kind"] == "Secret"]
    secret_names = {o["metadata"]["name"] for o in secrets}
    for name, workload in _workloads(objects).items():
        def flag(message: str, workload_name: str = name) -> None:
            found.append(f"{overlay} {workload_name}: {message}")

        spec = workload["spec"]["template"]["spec"]
        if spec.get("automountServiceAccountToken") is not False:
            flag("mounts a service-account token")
        pod_security = spec.get("securityContext", {})
        held: set[str] = set()
        for volume in spec.get("volumes", []):
            if "secret" in volume:
                items = volume["secret"].get("items")
                if items is None:
                    flag(f"secret volume {volume['name']} holds every key (list the items it uses)")
                    continue
                held |= {SECRET_FILES.get(item["key"], item["key"]) for item in items}
            if "projected" in volume:
                flag(f"projected volume {volume['name']} (a token or secret by another way)")
        extra = held - NEEDED_SECRETS.get(name, frozenset())
        if extra:
            flag(f"secrets it does not use: {sorted(extra)}")
        for container in spec.get("initContainers", []) + spec["containers"]:
            cname = f"{name}/{container['name']}"
            for entry in container.get("env", []):
                reference = entry.get("valueFrom", {})
                if "secretKeyRef" in reference or _secret_env(entry["name"]):
                    flag(f"secret in the environment ({entry['name']})", cname)
            for source in container.get("envFrom", []):
                if "secretRef" in source or source.get("configMapRef", {}).get("name") in secret_names:
                    flag("a secret as its whole environment", cname)
            for text in _texts(container.get("args", [])) + _texts(container.get("command", [])):
                if any(_secret_env(variable) for variable in VARIABLE_REFERENCE.findall(text)):
                    flag("a secret variable on its command line", cname)
            security = container.get("securityContext", {})
            if security.get("allowPrivilegeEscalation") is not False:
                flag("privilege escalation not forbidden", cname)
            if "ALL" not in security.get("capabilities", {}).get("drop", []):
                flag("capabilities not dropped", cname)
            if security.get("readOnlyRootFilesystem") is not True and container["name"] not in ("sglang",):
                flag("a writable root filesystem", cname)
            non_root = security.get("runAsNonRoot", pod_security.get("runAsNonRoot"))
            if non_root is not True and container["name"] not in RUNS_AS_ROOT:
                flag("may run as root", cname)
            seccomp = security.get("seccompProfile") or pod_security.get("seccompProfile")
            if seccomp is None:
                flag("no seccomp profile", cname)
            elif seccomp.get("type") == "Unconfined" and name != "executor":
                flag("an Unconfined seccomp profile", cname)
            if not container.get("resources", {}).get("limits", {}).get("memory"):
                flag("no memory limit", cname)
            image = container["image"]
            base = image.split("@")[0].rsplit(":", 1)[0].rsplit("/", 1)[-1]
            if overlay in PRODUCTION_OVERLAYS and base in OUR_IMAGES and "@sha256:" not in image:
                flag(f"image {image} is not pinned by digest", cname)
            if image.endswith(":latest") or ("@" not in image and ":" not in image.rsplit("/", 1)[-1]):
                flag(f"image {image} has no version", cname)
    policies = [o for o in objects if o["kind"] == "NetworkPolicy"]
    if not any(p["spec"]["podSelector"] == {} and set(p["spec"].get("policyTypes", [])) == {"Ingress", "Egress"}
               and not p["spec"].get("ingress") and not p["spec"].get("egress") for p in policies):
        found.append(f"{overlay}: no default-deny NetworkPolicy")
    workloads = _workloads(objects)
    for server in ("sglang-propose", "sglang-solve"):
        if server in workloads:
            labels = workloads[server]["spec"]["template"]["metadata"]["labels"]
            reach = set(_admitted(objects, labels, 30000))
            if not reach <= SGLANG_CLIENTS:
                found.append(f"{overlay} {server}: reachable on 30000 from {sorted(reach - SGLANG_CLIENTS)}")
    if "trainer" in workloads:
        labels = workloads["trainer"]["spec"]["template"]["metadata"]["labels"]
        reach = set(_admitted(objects, labels, 29400))
        if not reach <= {"trainer"}:
            found.append(f"{overlay} trainer: port 29400 reachable from {sorted(reach - {'trainer'})}")
    return found
