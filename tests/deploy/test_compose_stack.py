"""The whole pipeline under `docker compose --profile cpu`, for real: images built from the offline base, the
stack started, seed programs submitted through the proposer API, one self-play step by the coordinator, one
trainer update, and the new weight version served by both inference servers. On the way, isolation
(stack_isolation.py): the APIs up on a read-only root, Redis only with its password and with AOF on, and a hostile
program sent through the queue reaching no service and no network. Stack logs are written to
runs/deploy/<project>.log and printed when anything fails; the stack is always torn down with its volumes.

Needs a Docker engine (the executor's sandbox containers run on it too) and a compose CLI: skipped without them on a
laptop, a failure in CI (AZR_REQUIRE_SERVICES=1).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from compose_stack import ComposeStack, build_images, docker_engine
from stack_isolation import (
    check_apis_run_read_only,
    check_hostile_program_reaches_nothing,
    check_no_secret_in_any_environment_or_command_line,
    check_redis_needs_the_password_and_appends,
)
from throwaway_servers import REPO_ROOT

SEED_PROGRAMS = 4  # B·S = 2 per buffer is the target; a few more in case one is rejected
SEED_INDUCTION = 3


def poll(what: str, seconds: float, probe: Callable[[], Any], interval_s: float = 3.0) -> Any:
    """Call `probe` until it returns something truthy (exceptions count as not yet); AssertionError after `seconds`."""
    deadline = time.monotonic() + seconds
    last: Any = None
    while time.monotonic() < deadline:
        try:
            last = probe()
            if last:
                return last
        except (httpx.HTTPError, OSError, ValueError) as error:
            last = error
        time.sleep(interval_s)
    raise AssertionError(f"timed out after {seconds:.0f} s waiting for {what} (last: {last!r})")


def seed_requests(shared_dir: Path) -> list[dict[str, Any]]:
    """POST /v1/seeds bodies from the authors' seed files: programs (deduction+abduction) and induction tasks."""
    seeds = shared_dir / "data" / "azr_seeds"
    rows = [json.loads(line) for line in (seeds / "7b_coder_seed_io.jsonl").read_text().splitlines()[:SEED_PROGRAMS]]
    bodies = [{"kind": "program", "program": row["snippet"], "input": row["input"]} for row in rows]
    induction = [json.loads(line) for line in
                 (seeds / "7b_coder_code_f_seed_io.jsonl").read_text().splitlines()[:SEED_INDUCTION]]
    bodies += [{"kind": "induction", "program": row["snippet"], "inputs": row["inputs"], "message": row["message"]}
               for row in induction]
    return bodies


@pytest.mark.slow
@pytest.mark.docker
@pytest.mark.timeout(3600)
def test_cpu_stack_self_plays_trains_and_serves_the_new_weights(compose: list[str], shared_dir: Path) -> None:
    docker = docker_engine()
    started = time.monotonic()
    build_images(docker)
    built = time.monotonic()
    log_dir = REPO_ROOT / "runs" / "deploy"
    log_dir.mkdir(parents=True, exist_ok=True)
    stack = ComposeStack(compose, docker, log_dir)
    try:
        # Everything but the coordinator first, so the seeds are in the buffers before self-play starts.
        stack.run("up", "-d", "trainer-cpu", "proposer-api", "solver-api", "executor", timeout_s=900)
        poll("proposer-api ready", 600, lambda: stack.get_json("proposer", "/readyz")["status"] == "ready")
        poll("solver-api ready", 300, lambda: stack.get_json("solver", "/readyz")["status"] == "ready")
        for port in ("propose", "solve"):
            assert stack.get_json(port, "/model_info")["weight_version"] == "0"
        check_apis_run_read_only(stack)
        check_redis_needs_the_password_and_appends(stack)
        check_hostile_program_reaches_nothing(stack)
        check_no_secret_in_any_environment_or_command_line(stack)

        unauthenticated = httpx.post(stack.url("proposer") + "/v1/seeds", json=seed_requests(shared_dir)[0], timeout=30)
        assert unauthenticated.status_code == 401, unauthenticated.text
        headers = {"Authorization": f"Bearer {stack.token}"}
        for body in seed_requests(shared_dir):
            response = httpx.post(stack.url("proposer") + "/v1/seeds", json=body, headers=headers, timeout=120)
            assert response.status_code == 201, f"seed {body['program'][:40]!r}: {response.status_code} {response.text}"
        for buffer in ("deduction", "abduction", "induction"):
            total = stack.get_json("proposer", f"/v1/buffers/{buffer}?limit=1")["total"]
            assert total >= 2, f"{buffer} buffer holds {total} after seeding"

        stack.run("up", "-d", "coordinator", timeout_s=600)
        state = poll("the coordinator to finish its step", 1500,
                     lambda: (s := stack.container_state("coordinator")) and s.get("Status") == "exited" and s)
        assert state["ExitCode"] == 0, f"coordinator exited {state['ExitCode']}"
        metrics = [json.loads(line) for line in
                   stack.read_file("trainer-cpu", "/var/lib/azr/runs/stack/metrics.jsonl").splitlines()]
        assert [line["step"] for line in metrics] == [1]

        for port in ("propose", "solve"):
            info = poll(f"weight version 1 served on {port}", 900,
                        lambda port=port: (i := stack.get_json(port, "/model_info"))["weight_version"] == "1" and i)
            # servers load the bf16 weights-only export; the full resumable checkpoint is written beside it
            assert info["model_path"] == "/var/lib/azr/runs/stack/weights/v000001", info
        checkpoints = stack.list_dir("trainer-cpu", "/var/lib/azr/runs/stack/checkpoints")
        assert "v000001" in checkpoints, checkpoints
        print(f"\ncompose stack: build {built - started:.0f} s, up to served weight version 1 "
              f"{time.monotonic() - built:.0f} s")
    except BaseException:
        logs = stack.save_logs()
        print(f"\n===== compose stack logs ({stack.log_path}) =====\n{logs[-60000:]}")
        raise
    finally:
        stack.down()
