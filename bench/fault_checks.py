"""What a platform team checks after bench/faults.py's schedule, read from where the run keeps it:

- the steps PostgreSQL recorded (the run ends exactly at its target step, each step once);
- episodes: the ids the coordinator recorded (the `episodes` table) against the ids the trainer applied — each full
  checkpoint lists the episodes applied since the one before (every checkpoint is kept), and the Redis applied log
  holds one set per step. Lost: recorded, never applied. Duplicated: in more than one checkpoint;
- triplets: the same (buffer, program, input(s)) stored twice in `buffer_entries`;
- policy versions: checkpoints v1..vN with nothing missing, episodes' versions never going down from step to step,
  and the published version at the end equal to the target.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import redis
from sqlalchemy import create_engine, text

from services.queues.keys import applied_set_key, as_text, policy_version_key
from trainer_svc.checkpoints import checkpoints_root, load_trainer_state


@dataclass
class Ledger:
    steps: list[int]
    emitted: dict[str, int]  # episode id -> step (the episodes table)
    episode_versions: dict[int, set[int]]  # step -> policy versions of its episodes
    applied_in: dict[str, list[int]]  # episode id -> versions of the checkpoints that list it
    applied_log: set[str]  # the union of the Redis applied sets
    checkpoints: list[int]
    published: int
    duplicate_triplets: int
    triplets: int
    problems: list[str] = field(default_factory=list)

    def lost(self, step: int | None = None) -> list[str]:
        return sorted(i for i, s in self.emitted.items() if (step is None or s == step) and i not in self.applied_in)

    def duplicated(self, step: int | None = None) -> list[str]:
        return sorted(i for i, versions in self.applied_in.items()
                      if len(versions) > 1 and (step is None or self.emitted.get(i) == step))


def read_ledger(database_url: str, redis_url: str, run_id: str, run_dir: Path, target: int) -> Ledger:
    engine = create_engine(database_url)
    try:
        with engine.connect() as db:
            steps = [int(r[0]) for r in db.execute(
                text("SELECT step FROM steps WHERE run_id = :r ORDER BY step"), {"r": run_id})]
            rows = db.execute(text("SELECT id, step, policy_version FROM episodes WHERE run_id = :r"),
                              {"r": run_id}).all()
            triplets = int(db.execute(text("SELECT count(*) FROM buffer_entries")).scalar_one())
            duplicate_triplets = int(db.execute(text(
                "SELECT coalesce(sum(n - 1), 0) FROM (SELECT count(*) AS n FROM buffer_entries GROUP BY buffer, "
                "program, coalesce(input, ''), coalesce(CAST(inputs AS text), '')) AS g WHERE n > 1")).scalar_one())
    finally:
        engine.dispose()
    emitted = {str(r[0]): int(r[1]) for r in rows}
    versions: dict[int, set[int]] = {}
    for _, step, version in rows:
        versions.setdefault(int(step), set()).add(int(version))
    applied_in: dict[str, list[int]] = {}
    checkpoints = []
    for directory in sorted(checkpoints_root(run_dir).glob("v[0-9]*")):
        version = int(directory.name[1:])
        checkpoints.append(version)
        for episode_id in load_trainer_state(directory).applied_episode_ids:
            applied_in.setdefault(episode_id, []).append(version)
    client = redis.Redis.from_url(redis_url)
    try:
        applied_log = {as_text(m) for step in range(1, target + 1)
                       for m in client.smembers(applied_set_key(run_id, step))}
        published = int(client.get(policy_version_key(run_id)) or 0)
    finally:
        client.close()
    ledger = Ledger(steps, emitted, versions, applied_in, applied_log, checkpoints, published, duplicate_triplets,
                    triplets)
    ledger.problems = problems(ledger, target)
    return ledger


def problems(ledger: Ledger, target: int) -> list[str]:
    """Every way the run differs from what it should be (empty: all checks pass)."""
    found = []
    if ledger.steps != list(range(1, target + 1)):
        found.append(f"steps recorded {ledger.steps}, expected 1..{target}")
    if lost := ledger.lost():
        found.append(f"{len(lost)} episodes never applied: {lost[:5]}")
    if duplicated := ledger.duplicated():
        found.append(f"{len(duplicated)} episodes applied twice: {duplicated[:5]}")
    if strays := sorted(set(ledger.applied_in) - set(ledger.emitted)):
        found.append(f"{len(strays)} applied episodes the coordinator never recorded: {strays[:5]}")
    if missing := sorted(set(ledger.emitted) - ledger.applied_log):
        found.append(f"{len(missing)} episodes missing from the Redis applied log: {missing[:5]}")
    if ledger.duplicate_triplets:
        found.append(f"{ledger.duplicate_triplets} triplets stored twice")
    if ledger.checkpoints != list(range(1, len(ledger.checkpoints) + 1)) or len(ledger.checkpoints) != target:
        found.append(f"checkpoints {ledger.checkpoints}, expected v1..v{target}")
    if ledger.published != target:
        found.append(f"published policy version {ledger.published}, expected {target}")
    low = 0
    for step in sorted(ledger.episode_versions):
        versions = ledger.episode_versions[step]
        if len(versions) != 1 or min(versions) < low:
            found.append(f"step {step}: episode policy versions {sorted(versions)} after {low}")
        low = max(versions)
    return found
