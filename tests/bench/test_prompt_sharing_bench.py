"""bench/prompt_sharing.py: the update's micro-batches of a recorded step, their prompt positions before and with
sharing, and the timed prompt forward on a model, whose two caches must hold the same keys and values."""

from __future__ import annotations

import sys
from pathlib import Path

from services.algorithm.task_types import Role, TaskType
from services.inference.tiny_model import tiny_model_dir
from services.records import Episode
from services.settings import Settings
from services.store import open_store
from trainer_svc.resume import load_model_and_tokenizer

REPO_ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO_ROOT))  # bench/ is a directory of scripts, not an installed package

from bench.prompt_sharing import prompt_positions, time_step, update_micro_batches  # noqa: E402

INSTRUCTIONS = list(range(30, 50))


def write_run(run_dir: Path) -> None:
    """Step 1: two solve tasks answered twice each (one right, one wrong: all four carry signal) and two proposals
    with the same instructions, one valid (signal); step 2: no spread anywhere."""
    run_dir.mkdir()
    store = open_store(f"sqlite:///{run_dir / 'buffers.sqlite3'}", create=True)
    task_a, task_b = INSTRUCTIONS + [60, 61, 62], INSTRUCTIONS + [70] * 8  # the length plan pairs each task's samples
    rows = [(1, Role.SOLVE, task_a, [80] * 5, 1.0), (1, Role.SOLVE, task_a, [81] * 6, -1.0),
            (1, Role.SOLVE, task_b, [82] * 5, 1.0), (1, Role.SOLVE, task_b, [83] * 6, -1.0),
            (1, Role.PROPOSE, INSTRUCTIONS + [90] * 4, [91] * 8, 0.5),
            (1, Role.PROPOSE, INSTRUCTIONS + [92] * 4, [93] * 8, -1.0),
            (2, Role.SOLVE, task_a, [80] * 5, -1.0), (2, Role.SOLVE, task_a, [81] * 5, -1.0)]
    try:
        store.record_episodes([
            Episode(id=f"r-{k}", run_id="r", step=step, task_type=TaskType.DEDUCTION, role=role, prompt_ids=prompt,
                    response_ids=response, reward=reward, policy_version=step - 1)
            for k, (step, role, prompt, response, reward) in enumerate(rows)])
    finally:
        store.close()


def test_positions_before_and_with_sharing_of_a_recorded_step(tmp_path: Path) -> None:
    write_run(tmp_path / "r")
    settings = Settings(micro_batch_size=2, micro_batch_tokens=4096)
    micro_batches = update_micro_batches(tmp_path / "r", 1, settings)
    assert sum(mb.rows for mb in micro_batches) == 6
    assert update_micro_batches(tmp_path / "r", 2, settings) == []  # no signal, no update
    positions = [prompt_positions(mb) for mb in micro_batches]
    # each task's two samples forward one prompt, not two; the proposals their 20 instruction tokens once
    assert sorted(positions) == [(44, 22), (46, 20 + 2 * 3), (54, 27)]


def test_the_timed_forward_fills_the_same_caches_both_ways(tmp_path: Path) -> None:
    write_run(tmp_path / "r")
    micro_batches = update_micro_batches(tmp_path / "r", 1, Settings(micro_batch_size=3, micro_batch_tokens=0))
    network, _ = load_model_and_tokenizer(tiny_model_dir())
    result = time_step(network.eval(), micro_batches)
    assert result["padded_s"] > 0 and result["shared_s"] > 0
    assert result["max_abs_cache_difference"] < 1e-4
