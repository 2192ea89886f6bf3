"""What the compose stack test checks about isolation once the stack is up (test_compose_stack.py): the APIs run on a
read-only root, Redis refuses clients without the password and keeps an append-only file, no secret is in any
container's environment, command line or running processes' arguments (they are files, issue 37), and a hostile
program, submitted as the pipeline submits programs (an RQ job on the stack's Redis, run by the stack's executor
worker in its sandbox), reaches neither Redis nor any other service nor the network, and sees none of the secrets."""

from __future__ import annotations

import ast
import json
from typing import Any

import redis
from compose_stack import ComposeStack, run_checked

from executor_svc.rq_client import RQCodeExecutor
from services.execution import ExecStatus

HOSTILE_PROGRAM = """
import socket

def _os():
    for c in ().__class__.__base__.__subclasses__():
        if c.__name__ == '_wrap_close':
            return c.__init__.__globals__

def f(targets):
    reached = []
    for host, port in targets:
        try:
            socket.create_connection((host, port), timeout=1).close()
            reached.append(host + ':connected')
        except OSError as error:
            reached.append(host + ':' + type(error).__name__)
    return reached, sorted(_os()['environ'])
"""
"""Model-written code as an attacker would write it: the static check lets `socket` and the os gadget through on
purpose, so the sandbox alone must stop it."""


def container_id(stack: ComposeStack, service: str) -> str:
    """The id of a service's (first) container."""
    ids = stack.run("ps", "-q", service).stdout.split()
    assert ids, f"{service} has no container"
    return ids[0]


def inspect(stack: ComposeStack, service: str) -> dict[str, Any]:
    """`docker inspect` of a service's container."""
    return json.loads(run_checked([stack.docker, "inspect", container_id(stack, service)], 60))[0]


def check_apis_run_read_only(stack: ComposeStack) -> None:
    """Both APIs are up (the caller polled /readyz) on a read-only root with the model volume read-only."""
    for service in ("proposer-api", "solver-api"):
        details = inspect(stack, service)
        assert details["HostConfig"]["ReadonlyRootfs"] is True, service
        models = [m for m in details["Mounts"] if m["Destination"] == "/var/lib/azr/models"]
        assert models and models[0]["RW"] is False, f"{service}: {models}"


def check_redis_needs_the_password_and_appends(stack: ComposeStack) -> None:
    """No password, no access; with it, the append-only file is on."""
    anonymous = redis.Redis(host="127.0.0.1", port=stack.ports["redis"], socket_timeout=10)
    try:
        anonymous.ping()
        raise AssertionError("Redis answered a client without the password")
    except redis.AuthenticationError:
        pass
    finally:
        anonymous.close()
    client = redis.Redis.from_url(stack.redis_url(), socket_timeout=10)
    try:
        assert client.config_get("appendonly") == {"appendonly": "yes"}
    finally:
        client.close()


def check_hostile_program_reaches_nothing(stack: ComposeStack) -> None:
    """Through the real queue and the real executor worker: every connection fails, no secret is in sight."""
    networks = inspect(stack, "redis")["NetworkSettings"]["Networks"]
    redis_ip = next(iter(networks.values()))["IPAddress"]
    targets = [("redis", 6379), (redis_ip, 6379), ("postgres", 5432), ("proposer-api", 8001),
               ("sglang-propose", 30000), ("1.1.1.1", 53)]
    client = redis.Redis.from_url(stack.redis_url(), socket_timeout=30)
    executor = RQCodeExecutor(client, timeout_s=60.0)
    try:
        result = executor.validate_proposal(HOSTILE_PROGRAM, repr(targets))
    finally:
        client.close()
    assert result.status is ExecStatus.OK, f"{result.status}: {result.error}"
    reached, environment = ast.literal_eval(result.output or "")
    assert len(reached) == len(targets)
    assert not [r for r in reached if r.endswith(":connected")], reached
    assert not [name for name in environment if name.startswith("AZR_")], environment
    for secret in stack.secret_values.values():
        assert secret not in result.output


def check_no_secret_in_any_environment_or_command_line(stack: ComposeStack) -> None:
    """Every running container of the stack: its environment and command as `docker inspect` shows them, and the
    arguments of every process in it (`docker top`), hold no secret value (SGLang's admin key is the documented
    exception on the gpu profile only, not started here)."""
    for container in stack.run("ps", "-q").stdout.split():
        details = json.loads(run_checked([stack.docker, "inspect", container], 60))[0]
        shown = json.dumps([details["Config"].get("Env"), details["Config"].get("Cmd"),
                            details["Config"].get("Entrypoint"), details.get("Args")])
        running = details["State"].get("Running")  # the one-shot migrate and model-prep have exited
        processes = run_checked([stack.docker, "top", container, "-eo", "pid,args"], 60) if running else ""
        for name, value in stack.secret_values.items():
            assert value not in shown, f"{details['Name']}: {name} in its environment or command"
            assert value not in processes, f"{details['Name']}: {name} in a process's arguments"
