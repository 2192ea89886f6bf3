"""`azr coordinator`'s process: Algorithm 1 in the distributed profile. Rollouts go through the proposer and solver
APIs, executor work through RQ (ridden through Redis outages), episodes to the Redis stream, and the policy version
comes from the trainer's board; the steps' and the executor queue's metrics on a Prometheus endpoint."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import ExitStack

from azr.factory import parts
from azr.factory.process import Process
from services.coordinator.loop import SelfPlayLoop
from services.coordinator.prometheus_metrics import CoordinatorMetrics
from services.json_types import JsonObject
from services.ports import CodeExecutor, PolicyVersionBoard, TripletStore
from services.settings import Settings

Say = Callable[[str], None]


class CoordinatorProcess(Process):
    """The coordinator, started: `run()` imports the seed files (a new run) and runs the steps up to the target."""

    def __init__(self, *, settings: Settings, say: Say, store: TripletStore, executor: CodeExecutor,
                 loop: SelfPlayLoop, board: PolicyVersionBoard, closers: ExitStack) -> None:
        super().__init__(closers)
        self.settings, self.say = settings, say
        self.store, self.executor, self.loop, self.board = store, executor, loop, board

    def run(self) -> list[JsonObject]:
        if self.loop.last_step() == 0:
            parts.import_seed_files(self.settings, self.store, self.executor, self.say)
        return self.loop.run(policy_version=self.board.current())


def open_coordinator(settings: Settings, say: Say) -> CoordinatorProcess:
    """Build and start `azr coordinator`'s process from the distributed profile's settings."""
    from services.http.metrics_endpoint import serve_metrics

    with ExitStack() as closers:
        store = parts.run_store(settings, closers)
        prometheus = CoordinatorMetrics()
        executor = parts.code_executor(settings, closers, prometheus.registry, ride_through_redis_outages=True)
        channels = parts.episode_channels(settings)
        prometheus.watch_episode_queue(channels.queue)
        depth = parts.executor_queue_depth(executor)
        if depth is not None:
            prometheus.watch_executor_queue(depth)
        observability = settings.observability
        endpoint = serve_metrics(prometheus.registry, observability.coordinator_metrics_port,
                                 observability.metrics_address)
        if endpoint is not None:
            closers.callback(endpoint.close)
        rollouts = parts.rollouts(settings, closers)  # no local engine: HTTP to the proposer and solver APIs
        built = parts.self_play(settings, closers, store=store, executor=executor, rollouts=rollouts,
                                episodes=channels.queue, say=say, versions=channels.board,
                                on_step=prometheus.observe_step, steps_are_total=True)
        return CoordinatorProcess(settings=settings, say=say, store=store, executor=executor, loop=built.loop,
                                  board=channels.board, closers=closers.pop_all())
