"""The trainer's Prometheus endpoint after real TRR++ updates of the tiny model: in process (policy version, tokens/s,
update durations, loss and entropy of the last report, stale drops and rejections) and as the `azr trainer` process
on real Redis."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import httpx
import pytest
import redis
from prometheus_scrape import scrape, value
from throwaway_servers import free_port
from trainer_episodes import episode, six_group_batch
from transformers import AutoTokenizer

from services.http.metrics_endpoint import serve_metrics
from services.queues import (
    InProcessAppliedEpisodeLog,
    InProcessEpisodeQueue,
    InProcessPolicyVersionBoard,
    RedisEpisodeQueue,
)
from services.records.updates import UpdateReport
from services.settings import Settings
from trainer_svc.prometheus_metrics import TrainerMetrics
from trainer_svc.resume import fresh_trainer
from trainer_svc.service import TrainerService


def run_until_update(service: TrainerService, max_polls: int = 50) -> UpdateReport:
    for _ in range(max_polls):
        report = service.step(block_s=0.05)
        if report is not None:
            return report
    raise AssertionError(f"no batch after {max_polls} polls; waiting: {service.pool.counts()}")


@pytest.mark.slow
def test_scrape_after_updates_shows_version_throughput_and_drops(tiny_dir: Path, cpu_settings: Settings) -> None:
    # B = 1 leaves every advantage 0: Table 3's rule (every batch steps) so the updates have a throughput to show
    settings = cpu_settings.with_values(batch_size=1, max_staleness=0, entropy_coef=0.001,
                                               skip_zero_advantage_batches=False)
    loaded = fresh_trainer(tiny_dir, settings.trainer)
    queue = InProcessEpisodeQueue(claim_after_s=60)
    board = InProcessPolicyVersionBoard()
    metrics = TrainerMetrics()
    service = TrainerService(loaded=loaded, settings=settings.trainer, rollout=settings.rollout,
                             settings_record=settings.resolved(), queue=queue, applied_log=InProcessAppliedEpisodeLog(),
                             run_dir=settings.run.run_dir, board=board, read_count=7, metrics=metrics)
    endpoint = serve_metrics(metrics.registry, free_port(), "127.0.0.1")
    assert endpoint is not None
    url = f"http://127.0.0.1:{endpoint.port}/metrics"
    try:
        before = scrape(url)
        assert value(before, "azr_trainer_policy_version") == 0
        assert value(before, "azr_trainer_update_duration_seconds_count") == 0

        queue.publish(six_group_batch(loaded.tokenizer, 1, policy_version=0))
        first = run_until_update(service)
        after_first, published_first = scrape(url), board.current()
        # Now at policy version 1 with max staleness 0: version-0 episodes are stale; one episode is malformed.
        queue.publish(six_group_batch(loaded.tokenizer, 1, policy_version=0)
                      + [episode([1, 2], [10**6], 0.0, policy_version=1)]
                      + six_group_batch(loaded.tokenizer, 1, policy_version=1))
        second = run_until_update(service)
        samples = scrape(url)
    finally:
        endpoint.close()

    assert value(after_first, "azr_trainer_policy_version") == 1 == published_first
    assert value(after_first, "azr_trainer_tokens_per_second") == first.tokens_per_s > 0
    assert value(after_first, "azr_trainer_episodes_consumed_total") == 6

    assert value(samples, "azr_trainer_policy_version") == 2 == board.current()
    assert value(samples, "azr_trainer_step") == 2
    assert value(samples, "azr_trainer_updates_total") == 2
    assert value(samples, "azr_trainer_checkpoints_total") == 2
    assert value(samples, "azr_trainer_weight_pushes_total") == 2
    assert value(samples, "azr_trainer_server_repushes_total") == 0
    assert value(samples, "azr_trainer_servers_behind") == 0
    assert value(samples, "azr_trainer_episodes_consumed_total") == 12
    assert value(samples, "azr_trainer_stale_episodes_dropped_total") == 6 == second.stale_dropped
    assert value(samples, "azr_trainer_rejected_episodes_total") == 1
    assert value(samples, "azr_trainer_tokens_per_second") == second.tokens_per_s > 0
    assert value(samples, "azr_trainer_last_update_tokens") == second.tokens
    assert value(samples, "azr_trainer_loss") == second.loss
    assert value(samples, "azr_trainer_entropy_nats") == second.entropy > 0
    assert value(samples, "azr_trainer_update_duration_seconds_count") == 2
    assert value(samples, "azr_trainer_update_duration_seconds_sum") == \
        pytest.approx(first.step_time_s + second.step_time_s)
    assert value(samples, "azr_trainer_peak_memory_bytes", kind=second.memory_kind) == \
        pytest.approx(second.peak_memory_mb * 1024 * 1024)


@pytest.mark.slow
def test_trainer_process_serves_metrics_on_its_port(redis_url: str, tiny_dir: Path, tmp_path: Path) -> None:
    """`azr trainer` with AZR_TRAINER_METRICS_PORT, on real Redis: after one batch the scrape shows the update."""
    run_id = f"trainer-metrics-{uuid.uuid4().hex[:12]}"
    client = redis.Redis.from_url(redis_url)
    queue = RedisEpisodeQueue(client, run_id)
    port = free_port()
    env = {**os.environ, "AZR_RUN_ROOT": str(tmp_path / "runs"), "AZR_REDIS_URL": redis_url, "AZR_BATCH_SIZE": "1",
           "AZR_DEVICE": "cpu", "AZR_QUEUE_BACKEND": "redis", "AZR_TRAINER_METRICS_PORT": str(port),
           "AZR_METRICS_ADDRESS": "127.0.0.1", "AZR_CHECKPOINT_EVERY": "1"}
    command = [sys.executable, "-m", "azr", "trainer", "--run-id", run_id, "--model", str(tiny_dir),
               "--no-push", "--block-s", "0.2"]
    url = f"http://127.0.0.1:{port}/metrics"
    trainer = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        queue.publish(six_group_batch(AutoTokenizer.from_pretrained(tiny_dir), 1))
        deadline = time.monotonic() + 180
        samples: dict = {}
        while time.monotonic() < deadline and trainer.poll() is None:
            samples = _scrape_or_empty(url)
            # the update counter is read from the service at scrape time, the update's gauges are set just after
            # it: wait for the last of them (peak memory) so the scrape does not fall between the two
            if samples.get(("azr_trainer_updates_total", ())) == 1 and any(
                    key[0] == "azr_trainer_peak_memory_bytes" for key in samples):
                break
            time.sleep(0.2)
        assert trainer.poll() is None, trainer.communicate()[0]
        assert value(samples, "azr_trainer_updates_total") == 1
        assert value(samples, "azr_trainer_policy_version") == 1
        assert value(samples, "azr_trainer_tokens_per_second") > 0
        assert value(samples, "azr_trainer_episodes_consumed_total") == 6
        trainer.send_signal(signal.SIGTERM)
        output, _ = trainer.communicate(timeout=120)
        assert trainer.returncode == 0, output
    finally:
        if trainer.poll() is None:
            trainer.kill()
            trainer.wait(30)
        keys = list(client.scan_iter(match=f"azr:{run_id}:*"))
        if keys:
            client.delete(*keys)
        client.close()


def _scrape_or_empty(url: str) -> dict:
    """The scrape, or {} while the process has not bound its port yet."""
    try:
        return scrape(url)
    except httpx.TransportError:
        return {}
