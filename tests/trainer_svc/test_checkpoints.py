"""Checkpoints: HF round trip, restore gives bitwise the same next update, keep-last-N, atomic writes."""

from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import load_file
from trainer_episodes import six_group_batch

from services.settings import Settings
from trainer_svc.checkpoints import (
    TRAINER_STATE_FILE,
    checkpoint_name,
    latest_checkpoint,
    list_checkpoints,
    load_trainer_state,
    save_checkpoint,
)
from trainer_svc.resume import checkpoint_trainer, fresh_trainer, load_model_and_tokenizer, restore_trainer


def weights(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def test_checkpoint_round_trip_is_an_hf_directory_with_trainer_state(tiny_dir: Path, cpu_settings: Settings,
                                                                     tmp_path: Path) -> None:
    loaded = fresh_trainer(tiny_dir, cpu_settings.trainer)
    loaded.trainer.update(six_group_batch(loaded.tokenizer, 2))
    run_dir = tmp_path / "run"
    path = checkpoint_trainer(loaded, run_dir, cpu_settings.trainer, settings_record=cpu_settings.resolved(),
                              policy_version=1, applied_episode_ids=["a", "b"])
    assert path == run_dir / "checkpoints" / "v000001"
    assert (path / "model.safetensors").exists() and (path / "config.json").exists()
    assert (path / "tokenizer.json").exists() and (path / TRAINER_STATE_FILE).exists()
    assert json.loads((path / "settings.json").read_text())["learning_rate"] == cpu_settings.trainer.learning_rate
    model, tokenizer = load_model_and_tokenizer(path)  # what an inference server loads
    for name, tensor in weights(loaded.trainer.model).items():
        assert torch.equal(model.state_dict()[name], tensor), name
    assert tokenizer.encode("def f(x):") == loaded.tokenizer.encode("def f(x):")
    assert set(load_file(path / "model.safetensors")) <= set(model.state_dict())
    state = load_trainer_state(path)
    assert (state.step, state.policy_version, state.applied_episode_ids) == (1, 1, ["a", "b"])
    assert state.optimizer["state"], "AdamW moments must be saved"


def test_restore_then_one_update_is_bitwise_identical_to_continuing(tiny_dir: Path, cpu_settings: Settings,
                                                                    tmp_path: Path) -> None:
    settings = cpu_settings.with_values(weight_decay=0.01, entropy_coef=0.001)
    run_dir = tmp_path / "run"
    first = fresh_trainer(tiny_dir, settings.trainer)
    batch1 = six_group_batch(first.tokenizer, 2, policy_version=0)
    batch2 = six_group_batch(first.tokenizer, 3, policy_version=1)
    first.trainer.update(batch1)
    checkpoint_trainer(first, run_dir, settings.trainer, settings_record=settings.resolved(), policy_version=1)
    rng_at_save = (torch.random.get_rng_state(), random.getstate(), np.random.get_state()[1].copy())
    first.trainer.update(batch2)
    continued = weights(first.trainer.model)

    torch.manual_seed(12345)  # disturb every generator: restore must put them back
    random.seed(12345)
    np.random.seed(12345)
    restored = restore_trainer(run_dir, settings.trainer)
    assert restored is not None
    assert (restored.trainer.step, restored.trainer.policy_version) == (1, 1)
    assert torch.equal(torch.random.get_rng_state(), rng_at_save[0])
    assert random.getstate() == rng_at_save[1]
    assert np.array_equal(np.random.get_state()[1], rng_at_save[2])
    restored.trainer.update(batch2)
    resumed = weights(restored.trainer.model)
    assert continued.keys() == resumed.keys()
    for name in continued:
        assert torch.equal(continued[name], resumed[name]), f"{name} differs after resume"
    assert restored.trainer.step == first.trainer.step == 2


def test_keeps_only_the_last_n_checkpoints(tiny_dir: Path, cpu_settings: Settings, tmp_path: Path) -> None:
    settings = cpu_settings.with_values(keep_checkpoints=2)
    loaded = fresh_trainer(tiny_dir, settings.trainer)
    run_dir = tmp_path / "run"
    for version in (1, 2, 3, 4):
        checkpoint_trainer(loaded, run_dir, settings.trainer, settings_record=settings.resolved(),
                           policy_version=version)
    assert [p.name for p in list_checkpoints(run_dir)] == ["v000003", "v000004"]
    assert latest_checkpoint(run_dir) == run_dir / "checkpoints" / "v000004"
    with pytest.raises(FileExistsError):
        checkpoint_trainer(loaded, run_dir, settings.trainer, settings_record=settings.resolved(), policy_version=4)


def test_a_half_written_checkpoint_is_never_restored(tiny_dir: Path, cpu_settings: Settings, tmp_path: Path) -> None:
    loaded = fresh_trainer(tiny_dir, cpu_settings.trainer)
    run_dir = tmp_path / "run"
    assert latest_checkpoint(run_dir) is None and restore_trainer(run_dir, cpu_settings.trainer) is None
    checkpoint_trainer(loaded, run_dir, cpu_settings.trainer, settings_record=cpu_settings.resolved(), policy_version=1)
    # what a crash during the save of v2 leaves behind: a temp dir with partial content
    leftover = run_dir / "checkpoints" / f".tmp-{checkpoint_name(2)}-crashed"
    leftover.mkdir()
    (leftover / "config.json").write_text("{}")
    (run_dir / "checkpoints" / "v12").mkdir()  # not a checkpoint name either
    assert latest_checkpoint(run_dir) == run_dir / "checkpoints" / "v000001"
    restored = restore_trainer(run_dir, cpu_settings.trainer)
    assert restored is not None and restored.trainer.policy_version == 1
    checkpoint_trainer(loaded, run_dir, cpu_settings.trainer, settings_record=cpu_settings.resolved(), policy_version=2)
    assert not leftover.exists(), "the next save clears a crashed save's temp dir"


def test_a_failing_save_leaves_no_checkpoint(tiny_dir: Path, cpu_settings: Settings, tmp_path: Path) -> None:
    loaded = fresh_trainer(tiny_dir, cpu_settings.trainer)
    run_dir = tmp_path / "run"

    class Unwritable:
        def save_pretrained(self, directory: Path) -> None:
            (Path(directory) / "tokenizer.json").write_text("{")
            raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        save_checkpoint(run_dir, model=loaded.trainer.model, tokenizer=Unwritable(), optimizer=loaded.trainer.optimizer,
                        step=0, policy_version=1, settings_json={})
    assert list_checkpoints(run_dir) == []
    assert list((run_dir / "checkpoints").iterdir()) == []
