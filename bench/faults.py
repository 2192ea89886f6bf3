"""Fault injection on the whole distributed pipeline: while steps run, a schedule SIGKILLs and restarts
one thing at a time, then checks what a platform team would check.

The stack (bench/fault_stack.py): a throwaway Redis with its AOF, a private PostgreSQL cluster, an RQ executor
worker, `azr serve inference --model tiny`, both APIs, `azr trainer` and `azr coordinator --steps N`, each a process
restarted by a supervisor when it exits non-zero (compose's `restart: on-failure`). After `--clean` steps that set
the baseline step time, one fault per step, in this order (a round; `--rounds R` repeats it with a clean step
between rounds):

    coordinator mid-step · proposer API mid-step · inference server mid-generation ·
    Redis SIGKILLed, restarted on its AOF · PostgreSQL stopped `-m immediate`, restarted ·
    trainer mid-update · trainer between its update (pushed, published) and its checkpoint

and, once, before step 1: an executor worker SIGKILLed mid-job while the coordinator imports the seed files (the
tiny model proposes nothing the executor runs, so steps send it no job); its cost is the time until the killed job
has an outcome.

A mid-step fault is timed from its step's start (the previous step recorded and its version published) as a share
of a clean step's rollout; where the step ends before that moment (a loaded machine, a version published late after
a trainer restart) the fault moves to the next step, at most `STEP_SLIPS` times, says so in its row, and the rest of
the round moves with it (the target leaves the last round that much room).

Per fault: when it was injected (the step and what the process was doing), what recovered it (supervisor restarts
seen, and the mechanism), seconds lost (the interval from the last step recorded before the fault to the first one
after it, less the median clean interval), episodes lost / applied twice and triplets stored twice. Then the
run-wide checks of bench/fault_checks.py (exactly the target step, every episode applied once by id, no triplet
twice, versions only up) and every process up. Prints the table; writes bench/results/faults.json.

    nice -n 19 .venv/bin/python bench/faults.py                  # short form (CI runs it: tests/bench)
    nice -n 19 .venv/bin/python bench/faults.py --rounds 12      # the soak (>= 30 min here: 44.5 min)
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))

import redis  # noqa: E402
from sqlalchemy import create_engine, text  # noqa: E402

from bench.fault_checks import read_ledger  # noqa: E402
from bench.fault_stack import Stack, answers_ok, build_stack, start_run, wait_until  # noqa: E402
from services.queues.keys import policy_version_key  # noqa: E402
from trainer_svc.checkpoints import checkpoint_name, checkpoints_root  # noqa: E402

WORKER_FAULT = "executor worker SIGKILL mid-job"
RESULTS = REPO_ROOT / "bench" / "results" / "faults.json"
SERVER_OUTAGE_S = 2.0  # how long Redis / PostgreSQL stay down


@dataclass
class Row:
    fault: str
    step: int  # the step running (or, for the trainer, whose update ran) when it was injected
    injected: str  # what was going on at that moment
    recovered_by: str
    seconds_lost: float
    episodes_lost: int
    episodes_duplicated: int
    triplets_duplicated: int
    at_s: float  # seconds since the run started


class Watch:
    """The run as the bench sees it: steps recorded (PostgreSQL) and the published policy version (Redis)."""

    def __init__(self, stack: Stack) -> None:
        self.stack = stack
        self.engine = create_engine(stack.servers.database_url, pool_pre_ping=True)
        self.redis = redis.Redis.from_url(stack.servers.redis.url, socket_timeout=1, socket_connect_timeout=1)
        self.recorded: dict[int, float] = {}
        self.versions: list[tuple[float, int]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll_versions, daemon=True)
        self._thread.start()

    def steps(self) -> dict[int, float]:
        """step -> when it was recorded (time.time()), kept across outages of PostgreSQL."""
        try:
            with self.engine.connect() as db:
                for step, at in db.execute(text("SELECT step, recorded_at FROM steps WHERE run_id = :r"),
                                           {"r": self.stack.run_id}):
                    self.recorded[int(step)] = at.timestamp()
        except Exception:  # noqa: BLE001 - PostgreSQL may be the fault right now
            pass
        return self.recorded

    def last_step(self) -> int:
        return max(self.steps(), default=0)

    def version(self) -> int:
        return self.versions[-1][1] if self.versions else 0

    def _poll_versions(self) -> None:
        while not self._stop.wait(0.005):
            try:
                value = int(self.redis.get(policy_version_key(self.stack.run_id)) or 0)
            except redis.RedisError:
                continue
            if not self.versions or self.versions[-1][1] != value:
                self.versions.append((time.time(), value))

    def published_at(self, version: int) -> float:
        """When the board first showed `version` or more."""
        return min(at for at, value in self.versions if value >= version)

    def checkpointed(self, version: int) -> bool:
        return (checkpoints_root(self.stack.run_dir) / checkpoint_name(version)).is_dir()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self.engine.dispose()
        self.redis.close()


@dataclass
class Injection:
    step: int  # the step running (or whose update ran) when the fault hit
    what: str  # what was going on at that moment


@dataclass
class Fault:
    name: str
    inject: Callable[[Stack, Watch, int, float], Injection]  # (stack, watch, planned step, rollout_s)
    mechanism: str
    after_step: bool = False  # injected after `step` is recorded (the trainer's update of it), not during it


STEP_SLIPS = 3
"""How many later steps a mid-step fault may move to when its step ends before the fault's moment (a loaded machine
runs some steps faster than the clean steps' median, or publishes a version late)."""


def _step_started(watch: Watch, step: int, fraction: float, rollout_s: float) -> tuple[int, str]:
    """Wait until `step` runs (step − 1 recorded, its policy version published), then `fraction` of a clean step's
    rollout. Returns (the step still running then, a note when that is a later one). Each move halves the wait: steps
    faster than the clean ones (measured while the machine was busier) would otherwise keep ending first."""
    wait_s = fraction * rollout_s
    for candidate in range(step, step + STEP_SLIPS + 1):
        wait_until(lambda c=candidate: watch.last_step() >= c - 1 and watch.version() >= c - 1, 900,
                   f"step {candidate} to start")
        if watch.last_step() > candidate - 1:
            wait_s /= 2
            continue  # it ended while its version was being published
        time.sleep(wait_s)
        wait_s /= 2
        if watch.last_step() == candidate - 1:
            return candidate, "" if candidate == step else f" (planned for step {step}, which ended first)"
    raise AssertionError(f"steps {step}..{step + STEP_SLIPS} each ended before the fault's moment")


def _kill_during(service: str, fraction: float, doing: str) -> Callable[[Stack, Watch, int, float], Injection]:
    def inject(stack: Stack, watch: Watch, step: int, rollout_s: float) -> Injection:
        actual, note = _step_started(watch, step, fraction, rollout_s)
        stack.supervisor.kill(service)
        return Injection(actual, f"{doing}, {fraction:.0%} into step {actual}{note}")
    return inject


def kill_worker_in_seeding(stack: Stack) -> tuple[float, str, str]:
    """The tiny model proposes nothing the executor runs, so an executor job runs only while the coordinator imports
    the seed files: SIGKILL the worker in one of those. Returns (when, what, the job's id)."""
    from rq import Queue
    from rq.registry import StartedJobRegistry

    connection = redis.Redis.from_url(stack.servers.redis.url)
    registry = StartedJobRegistry(queue=Queue(stack.env["AZR_EXECUTOR_QUEUE"], connection=connection))
    try:
        wait_until(lambda: registry.count > 0, 600, "an executor job to start", interval_s=0.005)
        job = registry.get_job_ids()[0]
    finally:
        connection.close()
    at = stack.supervisor.kill("worker")
    return at, f"running seed-import job {job[:8]} (before step 1)", job


def job_settled(stack: Stack, job_id: str) -> bool:
    """Whether the killed job has an outcome (finished, failed for good, or gone)."""
    from rq.job import Job, JobStatus

    connection = redis.Redis.from_url(stack.servers.redis.url)
    try:
        status = Job.fetch(job_id, connection=connection).get_status()
    except Exception:  # noqa: BLE001 - expired or deleted: settled
        return True
    finally:
        connection.close()
    return status in (JobStatus.FINISHED, JobStatus.FAILED)


def _trainer_mid_update(stack: Stack, watch: Watch, step: int, rollout_s: float) -> Injection:
    wait_until(lambda: watch.last_step() >= step, 900, f"step {step} to be recorded")
    time.sleep(0.3)
    pushed, saved = watch.version() >= step, watch.checkpointed(step)
    stack.supervisor.kill("trainer")
    state = "its update of step {s} not yet pushed" if not pushed else "v{s} already pushed"
    return Injection(step, (state + (", checkpoint v{s} written" if saved else ", no checkpoint v{s}")).format(s=step))


def _trainer_before_checkpoint(stack: Stack, watch: Watch, step: int, rollout_s: float) -> Injection:
    wait_until(lambda: watch.version() >= step, 900, f"version {step} to be published", interval_s=0.002)
    saved = watch.checkpointed(step)
    stack.supervisor.kill("trainer")
    return Injection(step, f"v{step} pushed and published, checkpoint v{step} "
                     + ("already written (before its acks)" if saved else "not yet written"))


def _server_outage(which: str) -> Callable[[Stack, Watch, int, float], Injection]:
    def inject(stack: Stack, watch: Watch, step: int, rollout_s: float) -> Injection:
        actual, note = _step_started(watch, step, 0.3, rollout_s)
        server = stack.servers.redis if which == "redis" else stack.servers.postgres
        server.stop()
        time.sleep(SERVER_OUTAGE_S)
        server.start()
        return Injection(actual, f"30% into step {actual}{note}, down {SERVER_OUTAGE_S:.0f} s")
    return inject


ROUND = [
    Fault("coordinator SIGKILL mid-step", _kill_during("coordinator", 0.5, "mid-step"),
          "supervisor restart; step re-run under the same episode ids (the trainer applies each id once)"),
    Fault("proposer API SIGKILL", _kill_during("proposer", 0.3, "mid-step"),
          "supervisor restart; coordinator's HTTP retries"),
    Fault("inference server SIGKILL mid-generation", _kill_during("inference", 0.2, "generating"),
          "supervisor restart; trainer re-pushes its version (server check)"),
    Fault("Redis SIGKILL, restart on AOF", _server_outage("redis"),
          "AOF replay; coordinator/trainer ride through (AZR_REDIS_OUTAGE_S)"),
    Fault("PostgreSQL stop -m immediate, restart", _server_outage("postgres"),
          "the store retries with backoff (AZR_DATABASE_OUTAGE_S)"),
    Fault("trainer SIGKILL mid-update", _trainer_mid_update,
          "supervisor restart from checkpoint; unacked episodes redelivered", after_step=True),
    Fault("trainer SIGKILL between update and checkpoint", _trainer_before_checkpoint,
          "supervisor restart; board rewound to the checkpoint; redelivery", after_step=True),
]


def schedule(clean: int, rounds: int) -> tuple[list[tuple[int, Fault]], int]:
    """(step, fault) pairs and the target step: `clean` steps, then per round one fault a step and a clean step, then
    room for the last round's faults to slip `STEP_SLIPS` steps."""
    plan, step = [], clean + 1
    for _ in range(rounds):
        for fault in ROUND:
            plan.append((step, fault))
            step += 1
        step += 1  # a clean step after each round
    return plan, step - 1 + (STEP_SLIPS if rounds else 0)


def everything_up(stack: Stack, watch: Watch) -> bool:
    supervisor = stack.supervisor
    return (all(supervisor.alive(n) for n in ("worker", "inference", "proposer", "solver", "trainer"))
            and answers_ok(stack.url("inference") + "/health") and answers_ok(stack.url("proposer") + "/readyz")
            and answers_ok(stack.url("solver") + "/readyz"))


def run(clean: int, rounds: int, batch_size: int, work: Path, seeds: Path) -> dict[str, Any]:
    plan, target = schedule(clean, rounds)
    began = time.time()
    stack = build_stack(work, seeds, target=target, batch_size=batch_size, token="faults-" + uuid.uuid4().hex)
    watch = Watch(stack)
    injected: list[tuple[int, Fault, float, str, int]] = []  # step, fault, at, what, last step recorded before
    try:
        start_run(stack)
        rows = []
        if rounds:
            at, what, job = kill_worker_in_seeding(stack)
            print(f"[{at - began:7.1f} s] {WORKER_FAULT}: {what}", flush=True)
            settled = wait_until(lambda: job_settled(stack, job) and everything_up(stack, watch), 900,
                                 "the killed job to settle")
            restarted = ", ".join(stack.supervisor.restarts_between(at - 0.5, settled + 0.5))
            rows.append(Row(WORKER_FAULT, 0, what, restarted +
                            "; RQ marks the abandoned job failed, the client retries it", round(settled - at, 1),
                            0, 0, 0, round(at - began, 1)))
        wait_until(lambda: watch.last_step() >= clean, 1800, f"the {clean} clean steps")
        steps = watch.steps()
        intervals = [steps[s] - steps[s - 1] for s in range(2, clean + 1)]
        baseline = statistics.median(intervals)
        rollout = statistics.median(steps[s] - watch.published_at(s - 1) for s in range(2, clean + 1))
        print(f"baseline: {baseline:.1f} s from step to step, {rollout:.1f} s of it the rollout (medians of "
              f"{len(intervals)} clean steps); target {target}", flush=True)
        last_hit = 0
        for planned, fault in plan:
            step = max(planned, last_hit + 1)  # after a slip (STEP_SLIPS) the rest of the round moves with it
            if step > target:
                raise AssertionError(f"{fault.name} would fall after the target step {target} (faults slipped)")
            hit = fault.inject(stack, watch, step, rollout)
            last_hit = hit.step
            at, step, what = time.time(), hit.step, hit.what
            before = max(s for s, t in watch.steps().items() if t <= at)
            injected.append((step, fault, at, what, before))
            print(f"[{at - began:7.1f} s] {fault.name}: {what}", flush=True)
            wait_until(lambda before=before: max(watch.steps()) > before and everything_up(stack, watch), 900,
                       f"recovery from {fault.name}")
        wait_until(lambda: stack.supervisor.services["coordinator"].done, 900, "the coordinator to finish")
        wait_until(lambda: watch.version() >= target and watch.checkpointed(target), 900, "the last update")
        time.sleep(2)  # the last acknowledgements
        all_up = everything_up(stack, watch)
        ledger = read_ledger(stack.servers.database_url, stack.servers.redis.url, stack.run_id, stack.run_dir,
                             target)
        steps = watch.steps()
        next_at = [entry[2] for entry in injected[1:]] + [float("inf")]
        for (step, fault, at, what, before), until in zip(injected, next_at, strict=True):
            after = min(s for s, t in steps.items() if t > at)
            lost = max(0.0, steps[after] - steps[before] - baseline)
            window = range(before, after + 1)
            restarts = ", ".join(stack.supervisor.restarts_between(at - 0.5, until - 0.5)) or "no restart"
            rows.append(Row(fault.name, step, what, f"{restarts}; {fault.mechanism}", round(lost, 1),
                            sum(len(ledger.lost(s)) for s in window),
                            sum(len(ledger.duplicated(s)) for s in window), ledger.duplicate_triplets,
                            round(at - began, 1)))
        rewinds = [(v0, v1) for (_, v0), (_, v1) in zip(watch.versions, watch.versions[1:], strict=False) if v1 < v0]
        return {"target": target, "steps_recorded": ledger.steps, "rollout_step_s": round(baseline, 2),
                "batch_size": batch_size, "rounds": rounds, "wall_s": round(time.time() - began, 1),
                "episodes": len(ledger.emitted), "applied": len(ledger.applied_in),
                "episodes_lost": len(ledger.lost()), "episodes_duplicated": len(ledger.duplicated()),
                "triplets": ledger.triplets, "triplets_duplicated": ledger.duplicate_triplets,
                "checkpoints": len(ledger.checkpoints), "published_version": ledger.published,
                "board_rewinds": rewinds,
                "restarts": {name: s.starts - 1 for name, s in stack.supervisor.services.items()}, "all_up": all_up,
                "problems": ledger.problems + ([] if all_up else ["not every process is up at the end"]),
                "faults": [asdict(r) for r in rows]}
    except BaseException:
        for name in stack.supervisor.services:
            print(f"----- {name} -----\n{stack.supervisor.log(name)}", file=sys.stderr)
        raise
    finally:
        watch.close()
        stack.supervisor.stop()
        stack.servers.stop()


def table(result: dict[str, Any]) -> str:
    lines = ["| fault | step | when injected | what recovered it | s lost | episodes lost / dup | triplets dup |",
             "|---|---|---|---|---|---|---|"]
    for r in result["faults"]:
        lines.append(f"| {r['fault']} | {r['step']} | {r['injected']} | {r['recovered_by']} | {r['seconds_lost']} "
                     f"| {r['episodes_lost']} / {r['episodes_duplicated']} | {r['triplets_duplicated']} |")
    lines.append(f"\ntarget step {result['target']}, recorded {len(result['steps_recorded'])} steps "
                 f"(last {max(result['steps_recorded'], default=0)}); {result['episodes']} episodes recorded, "
                 f"{result['applied']} applied, lost {result['episodes_lost']}, duplicated "
                 f"{result['episodes_duplicated']}; {result['triplets']} triplets, {result['triplets_duplicated']} "
                 f"twice; published v{result['published_version']}, {result['checkpoints']} checkpoints, board "
                 f"rewinds {result['board_rewinds']}; restarts {result['restarts']}; every process up: "
                 f"{result['all_up']}; baseline {result['rollout_step_s']} s/step, wall {result['wall_s']} s")
    lines.append("problems: " + ("none" if not result["problems"] else "; ".join(result["problems"])))
    return "\n".join(lines)


def soak_table(result: dict[str, Any]) -> str:
    """Per fault over every round: how often, median and largest seconds lost, episodes lost / duplicated and
    triplets duplicated summed (the soak's summary; `table` lists each injection)."""
    by_fault: dict[str, list[dict[str, Any]]] = {}
    for row in result["faults"]:
        by_fault.setdefault(row["fault"], []).append(row)
    lines = ["| fault | times | s lost, median | s lost, max | moved to a later step | episodes lost / dup "
             "| triplets dup |", "|---|---|---|---|---|---|---|"]
    for fault, rows in by_fault.items():
        lost = [r["seconds_lost"] for r in rows]
        moved = sum("which ended first" in r["injected"] for r in rows)
        lines.append(f"| {fault} | {len(rows)} | {statistics.median(lost):.1f} | {max(lost):.1f} | {moved} "
                     f"| {sum(r['episodes_lost'] for r in rows)} / {sum(r['episodes_duplicated'] for r in rows)} "
                     f"| {max(r['triplets_duplicated'] for r in rows)} |")
    return "\n".join(lines)


def stop_on_signals() -> None:
    """SIGTERM, and SIGINT even where the shell that started the bench ignores it (a background job), end the run
    through its teardown: the stack's processes live in their own process groups and outlive a bench killed outright."""
    def stop(signum: int, _frame: object) -> None:
        raise KeyboardInterrupt(f"stopped by signal {signal.Signals(signum).name}")

    for each in (signal.SIGTERM, signal.SIGINT):
        signal.signal(each, stop)


def main(argv: list[str] | None = None) -> int:
    stop_on_signals()
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=1,
                        help="rounds of the eight faults (12: 44.5 min on 2 shared cores, the soak)")
    parser.add_argument("--clean", type=int, default=3, help="clean steps first (the baseline step time)")
    parser.add_argument("--batch-size", type=int, default=2)
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--keep", action="store_true", help="keep the work directory (logs, run directory)")
    args = parser.parse_args(argv)
    shared = Path(os.environ.get("AZR_SHARED_DIR", REPO_ROOT.parent / "shared"))
    work = Path(tempfile.mkdtemp(prefix="azr-faults-"))
    try:
        result = run(args.clean, args.rounds, args.batch_size, work, shared / "data" / "azr_seeds")
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
        else:
            print(f"work directory: {work}", file=sys.stderr)
    print(table(result))
    if args.rounds > 1:
        print("\n" + soak_table(result))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    return 0 if not result["problems"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
