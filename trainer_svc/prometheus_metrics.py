"""Prometheus metrics of the trainer, served by `azr trainer` on `AZR_TRAINER_METRICS_PORT`.

Two sources: each update's report (`observe_update`, called by TrainerService.step) for durations, throughput,
loss and the PPO diagnostics; and, read at scrape time, the service's own counters (ServiceCounters) and the
trainer's step and policy version, so those can never drift from what the service logs.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Protocol

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from services.records.updates import UpdateReport

UPDATE_SECONDS_BUCKETS = (0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0)
"""One update: a fraction of a second (tiny model on CPU) to many minutes (7B, 6·64 sequences of 8k tokens)."""

COUNTED = {
    "read": ("azr_trainer_deliveries_read", "Episode deliveries read from the queue (redeliveries included)"),
    "updates": ("azr_trainer_updates", "TRR++ updates applied"),
    "pushes": ("azr_trainer_weight_pushes", "bf16 weight exports pushed to the inference servers (one per update)"),
    "checkpoints": ("azr_trainer_checkpoints", "Full resumable checkpoints written (every checkpoint_every updates)"),
    "stale_dropped": ("azr_trainer_stale_episodes_dropped", "Episodes dropped as too many policy versions old"),
    "duplicates_skipped": ("azr_trainer_duplicate_episodes_skipped", "Redelivered episodes already applied"),
    "rejected": ("azr_trainer_rejected_episodes", "Malformed episodes acknowledged without training"),
    "acked": ("azr_trainer_acked_deliveries", "Deliveries acknowledged"),
}
"""ServiceCounters field -> (counter name without `_total`, help)."""


class CountersView(Protocol):
    """ServiceCounters' fields (trainer_svc/service.py)."""

    read: int
    updates: int
    pushes: int
    checkpoints: int
    stale_dropped: int
    duplicates_skipped: int
    rejected: int
    acked: int


class PolicyView(Protocol):
    """The trainer's position: its step and the policy version of its current weights."""

    step: int
    policy_version: int


class SyncCountersView(Protocol):
    """SyncCounters' fields (trainer_svc/server_sync.py)."""

    repushes: int
    behind: set[str]


class SyncView(Protocol):
    """The service's ServerSync (read-only members: the views are covariant)."""

    @property
    def counters(self) -> SyncCountersView: ...


class ServiceView(Protocol):
    """What the scrape reads from a TrainerService (read-only members: the views are covariant)."""

    @property
    def counters(self) -> CountersView: ...

    @property
    def trainer(self) -> PolicyView: ...

    @property
    def sync(self) -> SyncView: ...


class ServiceCollector(Collector):
    """Reads the service's counters, step and policy version at scrape time."""

    def __init__(self, service: ServiceView) -> None:
        self.service = service

    def collect(self) -> Iterator[CounterMetricFamily | GaugeMetricFamily]:
        """The service's counters, step and policy version as they are now."""
        counters = self.service.counters
        for field, (name, documentation) in COUNTED.items():
            yield CounterMetricFamily(name, documentation, value=float(getattr(counters, field)))
        trainer = self.service.trainer
        yield GaugeMetricFamily("azr_trainer_policy_version",
                                "Policy version of the trainer's current weights (the one it last pushed and "
                                "published)",
                                value=float(trainer.policy_version))
        yield GaugeMetricFamily("azr_trainer_step", "Updates applied since the run began (resumes included)",
                                value=float(trainer.step))
        sync = self.service.sync.counters
        yield CounterMetricFamily("azr_trainer_server_repushes", "Current weights pushed again to a server found "
                                  "serving another version (restarted, or missed a push)", value=float(sync.repushes))
        yield GaugeMetricFamily("azr_trainer_servers_behind", "Inference servers not (known to be) serving the "
                                "current policy version", value=float(len(sync.behind)))


class TrainerMetrics:
    """The trainer's metrics in their own registry."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        r = self.registry
        self.update_seconds = Histogram("azr_trainer_update_duration_seconds", "Wall time of one update (all PPO "
                                        "epochs of one batch)", buckets=UPDATE_SECONDS_BUCKETS, registry=r)
        self.episodes_consumed = Counter("azr_trainer_episodes_consumed", "Episodes trained on (each applied "
                                         "once)", registry=r)
        self.tokens_per_second = Gauge("azr_trainer_tokens_per_second", "Loss tokens x epochs per second of the "
                                       "last update", registry=r)
        self.update_tokens = Gauge("azr_trainer_last_update_tokens", "Response (loss) tokens of the last batch",
                                   registry=r)
        self.loss = Gauge("azr_trainer_loss", "Total loss of the last update (last epoch, token mean)", registry=r)
        self.pg_loss = Gauge("azr_trainer_policy_loss", "Clipped policy-gradient loss of the last update",
                             registry=r)
        self.entropy = Gauge("azr_trainer_entropy_nats", "Mean token entropy of the last update", registry=r)
        self.clip_fraction = Gauge("azr_trainer_clip_fraction_ratio", "Share of tokens whose PPO ratio was clipped "
                                   "in the last update", registry=r)
        self.approx_kl = Gauge("azr_trainer_approx_kl", "Approximate KL to the behaviour policy, last update",
                               registry=r)
        self.grad_norm = Gauge("azr_trainer_grad_norm", "Global gradient norm before clipping, last update",
                               registry=r)
        self.peak_memory = Gauge("azr_trainer_peak_memory_bytes", "Peak memory of the last update (CUDA max "
                                 "allocated, or the process's peak RSS on CPU)", ["kind"], registry=r)

    def watch(self, service: ServiceView) -> None:
        """Expose `service`'s counters, step and policy version, read at every scrape."""
        self.registry.register(ServiceCollector(service))

    def observe_update(self, report: UpdateReport) -> None:
        """Record one update's report."""
        self.update_seconds.observe(report.step_time_s)
        self.episodes_consumed.inc(report.episodes)
        self.tokens_per_second.set(report.tokens_per_s)
        self.update_tokens.set(report.tokens)
        self.loss.set(report.loss)
        self.pg_loss.set(report.pg_loss)
        self.entropy.set(report.entropy)
        self.clip_fraction.set(report.clip_fraction)
        self.approx_kl.set(report.approx_kl)
        self.grad_norm.set(report.grad_norm)
        self.peak_memory.labels(report.memory_kind).set(report.peak_memory_mb * 1024 * 1024)
