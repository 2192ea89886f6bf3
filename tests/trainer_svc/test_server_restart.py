"""`azr trainer` (a real process, real Redis) pushing to a real `azr serve inference` server that dies and comes back
mid-run: the push that finds it down does not stop the trainer, the restarted server (booted from the base model,
weight version "0") is noticed on its `/model_info` and given the current weights again, and the run goes on: the
server's samples carry the current version and later updates reach it. The server requires an admin key, which
the trainer sends."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest
import redis
from inference_servers import InferenceServerProcess
from trainer_episodes import six_group_batch
from trainer_processes import redis_trainer_env
from transformers import AutoTokenizer

from services.inference.sglang_client import SGLangClient
from services.ports import SamplingParams
from services.queues import RedisEpisodeQueue

ADMIN_KEY = f"admin-{uuid.uuid4().hex}"


def served_version(server: InferenceServerProcess) -> str | None:
    try:
        return httpx.get(server.url + "/model_info", timeout=5).json()["weight_version"]
    except (httpx.HTTPError, ValueError, KeyError):
        return None


def wait_for(condition: Callable[[], bool], timeout_s: float, what: str, trainer: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return
        if trainer.poll() is not None:
            raise AssertionError(f"trainer exited ({trainer.returncode}) before {what}: {trainer.stdout.read()}")
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.mark.slow
def test_a_restarted_inference_server_is_pushed_the_current_weights_and_the_run_goes_on(
        redis_url: str, tiny_dir: Path, tmp_path: Path) -> None:
    server = InferenceServerProcess(env={"AZR_SGLANG_ADMIN_API_KEY": ADMIN_KEY})
    run_id = f"restart-test-{uuid.uuid4().hex[:12]}"
    client = redis.Redis.from_url(redis_url)
    queue = RedisEpisodeQueue(client, run_id)
    version_key = f"azr:{run_id}:policy_version"
    published = lambda: int(client.get(version_key) or 0)  # noqa: E731
    tokenizer = AutoTokenizer.from_pretrained(tiny_dir)
    env = redis_trainer_env(tmp_path, redis_url, AZR_SGLANG_URLS=json.dumps([server.url]),
                            AZR_SGLANG_ADMIN_API_KEY=ADMIN_KEY, AZR_SERVER_CHECK_EVERY_S="0.5")
    trainer = None
    try:
        server.wait_ready()
        trainer = subprocess.Popen([sys.executable, "-m", "azr", "trainer", "--run-id", run_id, "--model",
                                    str(tiny_dir), "--block-s", "0.2"], env=env, stdout=subprocess.PIPE,
                                   stderr=subprocess.STDOUT, text=True)
        queue.publish(six_group_batch(tokenizer, 1))
        wait_for(lambda: published() == 1 and served_version(server) == "1", 180, "version 1 on the server", trainer)

        server.kill()  # the server dies; the next push finds it down
        queue.publish(six_group_batch(tokenizer, 1))
        wait_for(lambda: published() == 2, 120, "version 2 published despite the dead server", trainer)
        server.restart()  # back from the base model, weight version "0"
        server.wait_ready()
        wait_for(lambda: served_version(server) == "2", 60, "the restarted server to be re-pushed version 2", trainer)

        sampler = SGLangClient([server.url], tiny_dir, timeout=60)
        try:
            out = sampler.generate([tokenizer("def f(x):")["input_ids"]], SamplingParams(max_new_tokens=3, seed=1))
        finally:
            sampler.close()
        assert out[0][0].weight_version == "2", "its samples carry the current version: not stale, the run goes on"
        queue.publish(six_group_batch(tokenizer, 1))
        wait_for(lambda: published() == 3 and served_version(server) == "3", 120, "version 3 on the server", trainer)

        trainer.send_signal(signal.SIGTERM)
        output, _ = trainer.communicate(timeout=120)
        assert trainer.returncode == 0, output
        assert "step 3, policy version 3" in output and "server re-pushes 1" in output, output
        assert "push of policy version 2" in output and "serves weight version '0'" in output, output
    finally:
        if trainer is not None and trainer.poll() is None:
            trainer.kill()
            trainer.wait(30)
        server.stop()
        keys = list(client.scan_iter(match=f"azr:{run_id}:*"))
        if keys:
            client.delete(*keys)
        client.close()
