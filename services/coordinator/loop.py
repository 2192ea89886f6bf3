"""The self-play loop: buffer initialisation, then steps until done, a stop request, or an error.

Two ways the policy moves forward, one loop:
- embedded: after each step an in-process `PolicyUpdater` (the trainer) updates on the step's episodes, saves a
  checkpoint and pushes it to the engine; the next step runs on the new weights.
- distributed: the trainer is another process; before step s the loop waits until the published policy version is
  at least s − 1 − max_staleness, so generation runs at most `max_staleness` versions ahead of training.

Every step's metrics line goes to `metrics.jsonl` in the run directory and to the store (`record_step`); the step
counter resumes from the store, so a restarted coordinator continues where it stopped (a step that crashed midway
is run again under the same episode ids, which the trainer applies once).
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass

from services.coordinator.seeding import seed_buffers
from services.coordinator.step import SelfPlayStep, StaleRollouts, StepConfig, StepResult
from services.coordinator.step_metrics import MetricsLog
from services.json_types import JsonObject, JsonValue
from services.ports import PolicyUpdater, PolicyVersionBoard, StepEvaluation, StepStore
from services.reporting.running_trend import running_trend

Progress = Callable[[str], None]
StepObserver = Callable[[JsonObject], None]
"""Called with each finished step's metrics line (e.g. CoordinatorMetrics.observe_step for Prometheus)."""


@dataclass
class LoopOptions:
    steps: int  # steps to run: this many more (`until_step` None), else ignored
    seed: int
    seed_target: int  # B×S
    seed_max_rounds: int
    max_staleness: int
    version_wait_s: float = 3600.0  # distributed: longest wait for the trainer before giving up
    version_log_every_s: float = 10.0  # distributed: how often a wait for the trainer says what it waits for
    stale_retry_s: float = 10.0  # distributed: wait before re-running a step whose rollouts came from stale weights
    # The run's target step, a total: run the steps after the last recorded one up to this one, so a restarted
    # `azr coordinator --steps N` ends at step N, never N more. None: `steps` more (`azr run --resume --steps N`).
    until_step: int | None = None
    # A new run started from another run's snapshot (`lora_init_adapter`) continues that run's step count: its first
    # step is this one + 1, after seeding its buffers like any new run (they restart from the seed files).
    continues_after_step: int = 0


class SelfPlayLoop:
    """Runs seeding and steps; `request_stop()` (e.g. from a SIGINT handler) ends it at the next step boundary."""

    def __init__(self, *, run_id: str, step_runner: SelfPlayStep, store: StepStore, metrics: MetricsLog,
                 options: LoopOptions, updater: PolicyUpdater | None = None,
                 versions: PolicyVersionBoard | None = None, progress: Progress | None = None,
                 on_step: StepObserver | None = None, evaluation: StepEvaluation | None = None) -> None:
        if (updater is None) == (versions is None):
            raise ValueError("give exactly one of updater (embedded) or versions (distributed)")
        self.run_id, self.step_runner, self.store, self.metrics = run_id, step_runner, store, metrics
        self.options, self.updater, self.versions = options, updater, versions
        self.say = progress or (lambda _message: None)
        self.on_step = on_step
        self.policy_wait_s = 0.0  # how long the last step waited for the trainer's policy version
        self.evaluation = evaluation  # runs after the step's update, so it measures the policy that step produced
        self.stop_requested = False
        self.policy_version = 0

    def request_stop(self) -> None:
        self.stop_requested = True

    def last_step(self) -> int:
        """The last step recorded for this run (0 when none)."""
        steps = list(self.store.list_steps(self.run_id))
        return max((int(getattr(s, "step", s["step"] if isinstance(s, dict) else 0)) for s in steps), default=0)

    def seed(self, config: StepConfig, rng: random.Random) -> JsonObject:
        self.say(f"seeding buffers to {self.options.seed_target} entries each (at most "
                 f"{self.options.seed_max_rounds} rounds per phase)")
        return seed_buffers(store=self.store, executor=self.step_runner.executor, rollouts=self.step_runner.rollouts,
                            config=config, target=self.options.seed_target, max_rounds=self.options.seed_max_rounds,
                            rng=rng, policy_version=self.policy_version, progress=self.say)

    def run(self, *, policy_version: int = 0) -> list[JsonObject]:
        """Seed (first invocation only), then run the steps `options` ask for (up to `until_step`, or `steps` more);
        returns their metrics lines."""
        self.policy_version = policy_version
        recorded = self.last_step()
        first = max(recorded, self.options.continues_after_step) + 1
        last = self.options.until_step if self.options.until_step is not None else first + self.options.steps - 1
        if last < first and recorded > 0:  # a fresh run still seeds its buffers (`azr run --steps 0`)
            self.say(f"run {self.run_id} already recorded step {first - 1}; its target is step {last}: "
                     "nothing to run")
            return []
        if recorded > 0 and self.options.until_step is not None:
            self.say(f"resuming run {self.run_id} after step {first - 1}: steps {first}..{last}")
        if recorded == 0 and first > 1:
            self.say(f"run {self.run_id} continues the run its snapshot was taken from: steps from {first}")
        rng = random.Random(f"{self.options.seed}:{first}")
        if recorded == 0:
            report = self.seed(self.step_runner.config, rng)
            self.say(f"seeding done: {report}")
        if self.versions is not None:
            self._require_every_buffer()
        lines = []
        for step in range(first, last + 1):
            if self.stop_requested:
                self.say(f"stop requested: ending before step {step}")
                break
            waited = time.perf_counter()
            self.wait_for_policy(step)
            self.policy_wait_s = time.perf_counter() - waited
            self.say(f"step {step}: propose → validate → solve (policy v{self.policy_version})")
            result = self._run_step(step)
            line = self._finish_step(result)
            lines.append(line)
            if self.on_step is not None:
                self.on_step(line)
            self.say(summarise(line))
            trend = running_trend([record.metrics or {} for record in self.store.list_steps(self.run_id)])
            if trend is not None:
                self.say(trend)
        return lines

    def _run_step(self, step: int) -> StepResult:
        """The step, run again (same seed, same episode ids) while its rollouts come from weights the trainer would
        drop as stale: an inference server that restarted serves the base weights until the trainer's server check
        pushes it the current ones (within `server_check_every_s`)."""
        min_version = None if self.versions is None else step - 1 - self.options.max_staleness
        deadline = time.monotonic() + self.options.version_wait_s
        while True:
            try:
                return self.step_runner.run(step, self.policy_version, random.Random(f"{self.options.seed}:{step}"),
                                            min_version=min_version)
            except StaleRollouts as stale:
                if self.stop_requested or time.monotonic() > deadline:
                    raise
                self.say(f"{stale}; running step {step} again in {self.options.stale_retry_s:.0f} s")
                time.sleep(self.options.stale_retry_s)

    def _require_every_buffer(self) -> None:
        """The distributed trainer trains on B episodes of each of the six groups: an empty buffer would leave its
        solve group empty and the trainer waiting forever, so refuse to start instead, saying what to do."""
        from services.algorithm.task_types import TaskType

        empty = [t.value for t in TaskType if self.store.count(t) == 0]
        if empty:
            raise RuntimeError(f"buffer(s) {', '.join(empty)} empty after seeding: the trainer needs B episodes of "
                               "every task type and role. Import seeds (AZR_SEED_FILES, `azr seeds import`, "
                               "POST /v1/seeds) or raise AZR_SEED_MAX_ROUNDS")

    def wait_for_policy(self, step: int) -> None:
        """Distributed: block until the published policy version is at least step − 1 − max_staleness, saying what
        it waits for when it starts waiting and every `version_log_every_s` seconds after (never silently: a trainer
        that is down, or a batch that cannot fill, shows up here first)."""
        if self.versions is None:
            return
        needed = step - 1 - self.options.max_staleness
        started = time.monotonic()
        deadline = started + self.options.version_wait_s
        next_report = started
        while (current := self.versions.current()) < needed:
            now = time.monotonic()
            if self.stop_requested or now > deadline:
                raise TimeoutError(f"the trainer has not published policy version {needed} (at {current}) after "
                                   f"{now - started:.0f} s")
            if now >= next_report:
                self.say(f"step {step}: waiting for the trainer to publish policy version {needed} (step − 1 − max "
                         f"staleness {self.options.max_staleness}); published: {current}; waited {now - started:.0f} s"
                         f" of at most {self.options.version_wait_s:.0f} s")
                next_report = now + self.options.version_log_every_s
            time.sleep(0.5)
        self.policy_version = current

    def _finish_step(self, result: StepResult) -> JsonObject:
        line = dict(result.metrics)
        line["time/policy_wait"] = round(self.policy_wait_s, 4)  # outside the step's own timer (distributed only)
        self.store.record_episodes(result.episodes)
        if self.updater is not None:
            self.say(f"step {result.step}: training on {len(result.episodes)} episodes")
            began = time.perf_counter()
            report = self.updater.update_on(result.episodes, result.step)
            self.policy_version = report.policy_version
            line.update({f"train/{key}": value for key, value in report.metrics().items()})
            line["time/training"] = round(time.perf_counter() - began, 4)
        line["policy_version_after"] = self.policy_version
        if self.evaluation is not None and self.evaluation.due(result.step):
            line.update(self.evaluation.evaluate(result.step))
        self.metrics.append(line)
        self.store.record_step(self.run_id, result.step, self.policy_version, line)
        return line


def summarise(line: JsonObject) -> str:
    """One human line for the progress display: valid rates and mean rewards per task × role."""
    parts = [f"step {line['step']}"]
    for task_type in ("deduction", "abduction", "induction"):
        valid = line.get(f"valid_rate/{task_type}")
        propose = line.get(f"reward/{task_type}/propose")
        solve = line.get(f"reward/{task_type}/solve")
        parts.append(f"{task_type[:3]}: valid {_fmt(valid)} r_prop {_fmt(propose)} r_solve {_fmt(solve)}")
    if (signal := line.get("train/signal_episodes")) is not None:
        update = "no update" if line.get("train/optimizer_steps") == 0 else "update"
        parts.append(f"signal {signal}/{line.get('train/episodes')} episodes, {update}")
    rollout, training = line.get("time/total", 0.0), line.get("time/training")
    # time/total times the rollout only; an in-process update (embedded) comes after it and is shown beside it
    parts.append(f"{rollout:.1f}s" if training is None
                 else f"{rollout + training:.1f}s (rollout {rollout:.1f}s, training {training:.1f}s)")
    return " | ".join(parts)


def _fmt(value: JsonValue) -> str:
    return "-" if value is None else f"{value:.2f}"
