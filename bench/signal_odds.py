"""Groups with signal per minute at other batch sizes B, from a run's recorded episodes (for choosing B).

    .venv/bin/python bench/signal_odds.py RUN_DIR [--batch-sizes 2 4 8] [--step-seconds 2=424 4=610 ...]
                                              [--seconds-from-step N] [--caps 256 384 512]

A (task type, role) group of one step holds B episodes; its Eq 8 advantages are all zero, so it teaches nothing,
when its B rewards are all equal. Taking each group's episodes so far as independent draws from the outcome
frequencies seen in the run (p_r for reward value r), a group of size B carries signal with probability
1 − Σ_r p_r^B. Summed over the six groups: the expected groups with signal per step; divided by the seconds a step
takes at that B: per minute. Step seconds at the run's own B default to its median recorded step (rollout +
update; from step N with `--seconds-from-step`, e.g. where the engine changed); other sizes need
`--step-seconds B=S` from a measurement (bench/step_generation.py --int8-batch-sizes).

The response budget sets a step's tail (a batch decodes until its longest row stops): `--caps 256 384` prints, per
role, how many recorded responses each budget would have cut, and how many of those were well-formed or rewarded.

Limits: rewards within a group are not independent draws (one program, one prompt form), proposer rewards depend on
what the buffers hold, and the frequencies move as the policy learns; the table ranks B for the run as it stands.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))

from services.store import open_store  # noqa: E402

Group = tuple[str, str]
"""(task type, role)."""


def signal_probability(outcomes: Mapping[float, int], batch_size: int) -> float:
    """P(a group of `batch_size` independent draws is not all one value) = 1 − Σ_r p_r^B, p_r from `outcomes`
    (reward value → count); 0 for a group never seen."""
    total = sum(outcomes.values())
    if total == 0:
        return 0.0
    return 1.0 - sum((count / total) ** batch_size for count in outcomes.values())


@dataclass(frozen=True)
class SignalRow:
    """One batch size's expected signal."""

    batch_size: int
    groups_with_signal: float  # expected, per step, over all groups
    episodes_in_them: float  # expected episodes in those groups per step (what the update learns from)
    step_seconds: float | None
    groups_per_minute: float | None


def signal_rows(outcomes: Mapping[Group, Mapping[float, int]], batch_sizes: Sequence[int],
                step_seconds: Mapping[int, float]) -> list[SignalRow]:
    """The table's rows: for each B, expected groups with signal per step, the episodes in them, and per minute
    where `step_seconds` has that B."""
    rows = []
    for size in batch_sizes:
        groups = sum(signal_probability(counts, size) for counts in outcomes.values())
        seconds = step_seconds.get(size)
        rows.append(SignalRow(size, groups, groups * size, seconds,
                              None if seconds is None else groups * 60.0 / seconds))
    return rows


@dataclass(frozen=True)
class Response:
    """One episode's response, as the budget table needs it."""

    role: str
    tokens: int
    format_ok: bool
    reward: float


@dataclass
class RunRecord:
    """What the tables read from a run directory."""

    run_id: str
    batch_size: int
    outcomes: dict[Group, Counter[float]]  # reward value → count, per (task type, role)
    step_seconds: list[float]  # rollout + update of each recorded step (from `seconds_from_step`)
    responses: list[Response]


def read_run(run_dir: Path, seconds_from_step: int = 0) -> RunRecord:
    """A run directory's settings.json, store (every episode) and metrics.jsonl."""
    settings = json.loads((run_dir / "settings.json").read_text())
    run_id, database_url = settings["run_id"], str(settings.get("database_url") or "")
    if not database_url or database_url.startswith("sqlite"):  # the run's own file, wherever the run now lives
        database_url = f"sqlite:///{run_dir / 'buffers.sqlite3'}"
    record = RunRecord(run_id, int(settings["batch_size"]), {}, [], [])
    store = open_store(database_url)
    try:
        offset = 0
        while True:
            page, total = store.list_episodes(run_id, limit=500, offset=offset)
            for episode in page:
                group = (episode.task_type.value, episode.role.value)
                record.outcomes.setdefault(group, Counter())[episode.reward] += 1
                record.responses.append(Response(episode.role.value, len(episode.response_ids),
                                                 bool(episode.format_ok), episode.reward))
            offset += len(page)
            if not page or offset >= total:
                break
    finally:
        store.close()
    metrics = run_dir / "metrics.jsonl"
    for line in metrics.read_text().splitlines() if metrics.exists() else []:
        row = json.loads(line)
        if "time/total" in row and int(row.get("step", 0)) >= seconds_from_step:
            record.step_seconds.append(float(row["time/total"]) + float(row.get("time/training", 0.0)))
    return record


@dataclass(frozen=True)
class BudgetRow:
    """What a response budget of `cap` tokens would have cut, per role: responses longer than it, the well-formed
    ones among them (a cut response is a format failure), and those that earned more than the lowest reward."""

    cap: int
    role: str
    responses: int
    longer: int
    well_formed_longer: int
    rewarded_longer: int


def budget_rows(responses: Sequence[Response], caps: Sequence[int]) -> list[BudgetRow]:
    """One row per (cap, role) over `responses`; "rewarded" is a reward above the role's lowest seen."""
    rows = []
    for cap in caps:
        for role in sorted({r.role for r in responses}):
            mine = [r for r in responses if r.role == role]
            floor = min(r.reward for r in mine)
            longer = [r for r in mine if r.tokens > cap]
            rows.append(BudgetRow(cap, role, len(mine), len(longer), sum(r.format_ok for r in longer),
                                  sum(r.reward > floor for r in longer)))
    return rows


def parse_step_seconds(pairs: Sequence[str]) -> dict[int, float]:
    """`["4=610", ...]` → {4: 610.0}."""
    parsed = {}
    for pair in pairs:
        size, _, seconds = pair.partition("=")
        if not seconds:
            raise SystemExit(f"--step-seconds wants B=SECONDS, got {pair!r}")
        parsed[int(size)] = float(seconds)
    return parsed


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[2, 4, 8])
    parser.add_argument("--step-seconds", nargs="*", default=[], metavar="B=S")
    parser.add_argument("--seconds-from-step", type=int, default=0)
    parser.add_argument("--caps", type=int, nargs="*", default=[256, 384, 512],
                        help="response budgets to test against the recorded responses")
    args = parser.parse_args(argv)
    record = read_run(args.run_dir, args.seconds_from_step)
    run_id, own_size, counts, seconds = record.run_id, record.batch_size, record.outcomes, record.step_seconds
    step_seconds = parse_step_seconds(args.step_seconds)
    if seconds and own_size not in step_seconds:
        step_seconds[own_size] = statistics.median(seconds)
    episodes = sum(sum(c.values()) for c in counts.values())
    print(f"run {run_id}: B = {own_size}, {len(seconds)} steps, {episodes} episodes")
    print("| group | episodes | rewards seen (value × count) |\n|---|---|---|")
    for (task_type, role), outcome in sorted(counts.items()):
        seen = ", ".join(f"{value:g} × {count}" for value, count in sorted(outcome.items()))
        print(f"| {task_type}/{role} | {sum(outcome.values())} | {seen} |")
    print("\n| B | groups with signal / step | episodes in them / step | s / step | groups with signal / min |")
    print("|---|---|---|---|---|")
    for row in signal_rows(counts, args.batch_sizes, step_seconds):
        step_s = "—" if row.step_seconds is None else f"{row.step_seconds:.0f}"
        per_min = "—" if row.groups_per_minute is None else f"{row.groups_per_minute:.3f}"
        print(f"| {row.batch_size} | {row.groups_with_signal:.2f} | {row.episodes_in_them:.1f} | {step_s} "
              f"| {per_min} |")
    if args.caps and record.responses:
        print("\n| budget | role | responses | longer | well-formed among them | rewarded among them |")
        print("|---|---|---|---|---|---|")
        for cut in budget_rows(record.responses, args.caps):
            print(f"| {cut.cap} | {cut.role} | {cut.responses} | {cut.longer} | {cut.well_formed_longer} "
                  f"| {cut.rewarded_longer} |")


if __name__ == "__main__":
    main()
