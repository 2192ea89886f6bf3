"""bench/signal_odds.py: the odds that a group of B carries signal, by hand, and the table from a real run directory
(SQLite store with recorded episodes, metrics.jsonl, settings.json) as the script prints it."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from services.algorithm.task_types import Role, TaskType
from services.records import Episode
from services.store import open_store

REPO_ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO_ROOT))  # bench/ is a directory of scripts, not an installed package

from bench.signal_odds import (  # noqa: E402
    Response,
    budget_rows,
    main,
    parse_step_seconds,
    read_run,
    signal_probability,
    signal_rows,
)


def test_a_group_has_signal_unless_all_its_rewards_are_equal() -> None:
    assert signal_probability({-1.0: 1, -0.5: 1}, 2) == pytest.approx(0.5)
    assert signal_probability({-1.0: 1, -0.5: 1}, 4) == pytest.approx(1 - 2 / 16)
    assert signal_probability({-1.0: 3, 1.0: 1}, 2) == pytest.approx(1 - 9 / 16 - 1 / 16)
    assert signal_probability({-1.0: 14}, 8) == 0.0 and signal_probability({}, 2) == 0.0


def test_rows_sum_the_groups_and_divide_by_the_given_step_time() -> None:
    outcomes = {("deduction", "solve"): {-1.0: 1, -0.5: 1}, ("abduction", "solve"): {-1.0: 1, -0.5: 1},
                ("induction", "propose"): {-1.0: 5}}
    two, four = signal_rows(outcomes, [2, 4], {2: 120.0})
    assert two.groups_with_signal == pytest.approx(1.0) and two.episodes_in_them == pytest.approx(2.0)
    assert two.groups_per_minute == pytest.approx(0.5)
    assert four.groups_with_signal == pytest.approx(1.75) and four.step_seconds is None
    assert four.groups_per_minute is None
    assert parse_step_seconds(["4=610", "8=1200.5"]) == {4: 610.0, 8: 1200.5}
    with pytest.raises(SystemExit, match="B=SECONDS"):
        parse_step_seconds(["4"])


def write_run(run_dir: Path) -> None:
    run_dir.mkdir()
    (run_dir / "settings.json").write_text(json.dumps({
        "run_id": "r", "batch_size": 2, "database_url": "sqlite:////moved/elsewhere/buffers.sqlite3"}))
    store = open_store(f"sqlite:///{run_dir / 'buffers.sqlite3'}", create=True)
    rewards = {1: [-1.0, -0.5], 2: [-1.0, -1.0], 3: [-0.5, -0.5]}  # deduction solvers: signal in step 1 only
    try:
        store.record_episodes([
            Episode(id=f"r-{step}-{role.value}-{k}", run_id="r", step=step, task_type=TaskType.DEDUCTION, role=role,
                    prompt_ids=[1], response_ids=[2], reward=reward if role is Role.SOLVE else -1.0,
                    policy_version=step - 1)
            for step, pair in rewards.items() for role in (Role.SOLVE, Role.PROPOSE) for k, reward in enumerate(pair)])
    finally:
        store.close()
    (run_dir / "metrics.jsonl").write_text("".join(
        json.dumps({"step": step, "time/total": total, "time/training": 20.0}) + "\n"
        for step, total in [(1, 1000.0), (2, 100.0), (3, 200.0)]))


def test_the_table_from_a_recorded_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run_dir = tmp_path / "run"
    write_run(run_dir)  # settings.json names a database path that no longer exists: the run's own file is read
    record = read_run(run_dir, seconds_from_step=2)
    assert (record.run_id, record.batch_size, record.step_seconds) == ("r", 2, [120.0, 220.0])
    assert record.outcomes == {("deduction", "solve"): {-1.0: 3, -0.5: 3}, ("deduction", "propose"): {-1.0: 6}}
    assert len(record.responses) == 12 and {r.tokens for r in record.responses} == {1}
    main([str(run_dir), "--batch-sizes", "2", "4", "--step-seconds", "4=300", "--seconds-from-step", "2",
          "--caps", "0"])
    out = capsys.readouterr().out
    assert "run r: B = 2, 2 steps, 12 episodes" in out
    assert "| deduction/solve | 6 | -1 × 3, -0.5 × 3 |" in out
    assert "| 2 | 0.50 | 1.0 | 170 | 0.176 |" in out  # median of 120 and 220 s; 0.5 × 60 / 170
    assert "| 4 | 0.88 | 3.5 | 300 | 0.175 |" in out
    assert "| 0 | solve | 6 | 6 | 0 | 3 |" in out  # a budget of 0 cuts all; 3 had more than the lowest reward


def test_a_budget_counts_what_it_would_have_cut_per_role() -> None:
    responses = [Response("solve", 40, True, -0.5), Response("solve", 300, False, -1.0),
                 Response("solve", 500, True, -0.5), Response("propose", 700, True, -1.0),
                 Response("propose", 100, False, -1.0)]
    rows = {(row.cap, row.role): row for row in budget_rows(responses, [256, 512])}
    assert (rows[256, "solve"].longer, rows[256, "solve"].well_formed_longer, rows[256, "solve"].rewarded_longer) \
        == (2, 1, 1)
    assert (rows[512, "solve"].longer, rows[512, "solve"].well_formed_longer) == (0, 0)
    assert (rows[256, "propose"].longer, rows[256, "propose"].well_formed_longer,
            rows[256, "propose"].rewarded_longer) == (1, 1, 0)  # every proposer reward is the lowest
    assert rows[512, "propose"].responses == 2
