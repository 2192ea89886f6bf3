"""The executor pod as k8s/ describes it, reproduced in a Docker container: its user, read-only root, dropped
capabilities, no-new-privileges, seccomp profile and scratch mounts come from the rendered Deployment, and the image
is the offline base the application image is built on (docker/build_offline_base.sh: python3 + bubblewrap). Inside,
the executor's process backend starts in the sandbox mode the manifest sets, and a hostile program in one of its
sandbox workers must reach neither the Redis the pod itself reaches (the host's, over the host network) nor any
secret of the pod's environment.

Docker's defaults are the kubelet's: the RuntimeDefault-like seccomp profile when none is named, and a /proc with
masked paths (procMount Default). Needs a Docker engine and Redis on 127.0.0.1:6379 (skipped without them on a
laptop, a failure in CI).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import uuid
from pathlib import Path
from typing import Any

import pytest
from compose_stack import BASE_IMAGE, docker_engine, run_checked
from deploy_tools import objects_of
from throwaway_servers import REPO_ROOT, skip_or_fail

PROBE = REPO_ROOT / "tests" / "deploy" / "pod_sandbox_probe.py"
WORKDIR = "/srv/azr"


def container_flags(pod: dict[str, Any], container: dict[str, Any], secret_value: str = "unused",
                    scratch: Path | None = None) -> list[str]:
    """`docker run` flags for a container's securityContext, emptyDir and secret mounts under its pod's
    securityContext; each secret file holds `secret_value` (written under `scratch`)."""
    pod_security, security = pod.get("securityContext", {}), container.get("securityContext", {})
    user = security.get("runAsUser", pod_security.get("runAsUser"))
    group = security.get("runAsGroup", pod_security.get("runAsGroup"))
    flags = ["--user", f"{user}:{group}"]
    if security.get("readOnlyRootFilesystem"):
        flags.append("--read-only")
    for capability in security.get("capabilities", {}).get("drop", []):
        flags += ["--cap-drop", capability]
    if security.get("allowPrivilegeEscalation") is False:
        flags += ["--security-opt", "no-new-privileges"]
    seccomp = (security.get("seccompProfile") or pod_security.get("seccompProfile") or {"type": "RuntimeDefault"})
    if seccomp["type"] == "Unconfined":
        flags += ["--security-opt", "seccomp=unconfined"]
    elif seccomp["type"] != "RuntimeDefault":
        pytest.fail(f"seccomp profile {seccomp} has no Docker equivalent in this test")
    assert "procMount" not in security, "the test reproduces the default (masked) /proc only"
    empty_dirs = {v["name"] for v in pod.get("volumes", []) if "emptyDir" in v}
    secret_volumes = {v["name"]: v["secret"] for v in pod.get("volumes", []) if "secret" in v}
    for mount in container.get("volumeMounts", []):
        if mount["name"] in secret_volumes:  # the pod's secret files, each holding the test's secret value
            directory = Path(tempfile.mkdtemp(prefix="pod-secrets-", dir=scratch))
            directory.chmod(0o755)
            for item in secret_volumes[mount["name"]]["items"]:
                (directory / item["path"]).write_text(secret_value)
                (directory / item["path"]).chmod(0o444)
            flags += ["-v", f"{directory}:{mount['mountPath']}:ro"]
            continue
        assert mount["name"] in empty_dirs, f"{mount}: only emptyDir and secret mounts are reproduced"
        flags += ["--tmpfs", mount["mountPath"]]
    return flags


def run_probe(docker: str, flags: list[str], sandbox: str, secret: str) -> dict[str, Any]:
    """pod_sandbox_probe.py's report from a container with `flags`, on the host network (the pod reaches Redis)."""
    argv = [docker, "run", "--rm", "--network", "host", *flags, "-e", f"AZR_REDIS_URL=redis://:{secret}@127.0.0.1",
            "-v", f"{REPO_ROOT / 'executor_svc'}:{WORKDIR}/executor_svc:ro", "-v", f"{PROBE}:{WORKDIR}/probe.py:ro",
            "-w", WORKDIR, "-e", f"PYTHONPATH={WORKDIR}", BASE_IMAGE, "python3", "probe.py", sandbox, "6379", secret]
    result = subprocess.run(argv, capture_output=True, text=True, timeout=300, check=False)
    assert result.returncode == 0, f"probe container exited {result.returncode}:\n{result.stdout}\n{result.stderr}"
    return json.loads(result.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def docker_with_base_image() -> str:
    """The docker client, with the offline base image built (idempotent; bubblewrap inside, copied from the host's)."""
    docker = docker_engine()
    if shutil.which("bwrap") is None:
        skip_or_fail("bubblewrap is not installed on this host (the offline base image copies the host's)")
    run_checked(["bash", "docker/build_offline_base.sh", BASE_IMAGE], 900, {**os.environ, "DOCKER": docker})
    return docker


@pytest.mark.docker
@pytest.mark.timeout(1200)
def test_generated_code_in_the_executor_pod_reaches_neither_redis_nor_its_secrets(
        docker_with_base_image: str, rendered_overlays: dict[str, Any], redis_url: str, tmp_path: Path) -> None:
    pod = objects_of(rendered_overlays["gpu"], "Deployment")["executor"]["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    sandbox = next(e["value"] for e in container["env"] if e["name"] == "AZR_EXECUTOR_SANDBOX")
    secret = f"pod-secret-{uuid.uuid4().hex}"
    report = run_probe(docker_with_base_image, container_flags(pod, container, secret, tmp_path), sandbox, secret)
    assert report["pod_reaches_redis"] is True, report  # the worker itself must reach its queue
    assert "refused" not in report, f"the pod cannot run its sandbox: {report['refused']}"
    assert report["isolation"] == "bwrap", report
    assert report["status"] == "ok", report
    assert report["redis"] != "connected" and report["dns"] != "resolved", report
    assert report["secret_seen"] is False, report


@pytest.mark.docker
@pytest.mark.timeout(1200)
def test_the_default_seccomp_profile_leaves_no_sandbox(docker_with_base_image: str, rendered_overlays: dict[str, Any],
                                                       redis_url: str, tmp_path: Path) -> None:
    """Why the executor container names its seccomp profile: under the default one neither bubblewrap nor the rootless
    sandbox can unshare, so the worker refuses to start, with `bwrap` and with `auto` alike (before issue 37 `auto`
    ran generated code with rlimits only); only an explicit `none` runs it, and then it reaches Redis."""
    pod = objects_of(rendered_overlays["gpu"], "Deployment")["executor"]["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    confined = json.loads(json.dumps(container))
    confined["securityContext"].pop("seccompProfile", None)
    flags = container_flags({**pod, "securityContext": {**pod["securityContext"],
                                                        "seccompProfile": {"type": "RuntimeDefault"}}}, confined,
                            scratch=tmp_path)
    refused = run_probe(docker_with_base_image, flags, "bwrap", "unused")
    assert "bubblewrap cannot run a worker" in refused.get("refused", ""), refused
    automatic = run_probe(docker_with_base_image, flags, "auto", "unused")
    assert "refusing to run model-written code unconfined" in automatic.get("refused", ""), automatic
    asked = run_probe(docker_with_base_image, flags, "none", "unused")
    assert asked["isolation"] == "none" and asked["redis"] == "connected", asked
