"""bench/faults.py's short form: the distributed pipeline on loopback (its own Redis with AOF and its own PostgreSQL
cluster, every service a process under a restart-on-failure supervisor) takes one round of the eight faults — an
executor worker mid-job (while the seeds are imported), the coordinator mid-step, an API, the inference server
mid-generation, Redis, PostgreSQL, the trainer mid-update and between its update and its checkpoint — and must end
exactly at its target step with every episode applied once by id, no triplet stored twice, versions only going up
and every process up."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO_ROOT))  # bench/ is a directory of scripts, not an installed package

from bench.faults import ROUND, WORKER_FAULT, run, table  # noqa: E402


@pytest.mark.slow
@pytest.mark.faults
def test_one_round_of_faults_loses_and_repeats_nothing(tmp_path: Path, shared_dir: Path) -> None:
    result = run(clean=2, rounds=1, batch_size=2, work=tmp_path, seeds=shared_dir / "data" / "azr_seeds")
    print(table(result))
    if out := os.environ.get("AZR_FAULTS_JSON"):  # where to keep the figures (bench/results/faults.json)
        Path(out).write_text(json.dumps(result, indent=2) + "\n")
    assert [row["fault"] for row in result["faults"]] == [WORKER_FAULT] + [fault.name for fault in ROUND]
    assert result["problems"] == [], result["problems"]
    assert result["steps_recorded"] == list(range(1, result["target"] + 1))
    assert result["episodes"] > 0 and result["applied"] == result["episodes"]
    assert (result["episodes_lost"], result["episodes_duplicated"], result["triplets_duplicated"]) == (0, 0, 0)
    assert result["published_version"] == result["target"] == result["checkpoints"]
    assert result["all_up"]
    # every SIGKILLed service came back through the supervisor
    for service in ("coordinator", "worker", "proposer", "inference", "trainer"):
        assert result["restarts"][service] >= 1, (service, result["restarts"])
    # the trainer killed after publishing a version it had not checkpointed rewound the board to its checkpoint
    assert all(new == old - 1 for old, new in result["board_rewinds"]), result["board_rewinds"]
