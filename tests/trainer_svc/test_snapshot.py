"""A LoRA run's portable snapshot: written from a checkpoint in one bf16 file, a new trainer starts from it."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from services.settings import Settings
from trainer_svc.resume import checkpoint_trainer, fresh_trainer
from trainer_svc.snapshot import snapshot_metadata, write_snapshot


def lora_settings(tmp_path: Path, **extra: object) -> Settings:
    return Settings(lora_rank=4, lora_alpha=8.0, device="cpu", run_root=tmp_path, run_id="snap",
                    gradient_checkpointing=False, **extra)  # type: ignore[arg-type]


def adapter_weights(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {n: p.detach().clone() for n, p in model.named_parameters() if "lora_" in n}


def test_a_new_trainer_starts_from_the_snapshot(tiny_dir: Path, tmp_path: Path) -> None:
    loaded = fresh_trainer(tiny_dir, lora_settings(tmp_path).trainer)
    with torch.no_grad():  # trained adapters: B away from its zero start
        for name, parameter in loaded.trainer.model.named_parameters():
            if "lora_" in name:
                parameter.add_(torch.randn_like(parameter) * 0.1)
    loaded.trainer.step = 7
    settings = lora_settings(tmp_path)
    checkpoint = checkpoint_trainer(loaded, tmp_path / "snap", settings.trainer, settings_record=settings.resolved(),
                                    policy_version=7)
    target = write_snapshot(checkpoint, tmp_path / "snapshot.safetensors", model="tiny", step=7, policy_version=7,
                            run_step=9)  # two of the run's steps made no update
    header = snapshot_metadata(target)
    assert (header["step"], header["policy_version"], header["run_step"], header["model"]) == (7, 7, 9, "tiny")
    assert header["adapter_config"]["r"] == 4

    resumed = fresh_trainer(tiny_dir, lora_settings(tmp_path / "new", lora_init_adapter=target).trainer)
    assert resumed.restored and resumed.trainer.policy_version == 7 and resumed.trainer.step == 7
    assert resumed.snapshot_run_step == 9 and resumed.checkpoint is None  # the new run's steps go on from 10
    before, after = adapter_weights(loaded.trainer.model), adapter_weights(resumed.trainer.model)
    assert before.keys() == after.keys()
    for name in before:  # bf16 in the file: equal to bf16 rounding
        assert torch.allclose(before[name], after[name], atol=1e-2, rtol=1e-2), name
    assert any(after[name].abs().sum() > 0 for name in after if "lora_B" in name)


def test_a_snapshot_of_another_rank_is_refused(tiny_dir: Path, tmp_path: Path) -> None:
    loaded = fresh_trainer(tiny_dir, lora_settings(tmp_path).trainer)
    settings = lora_settings(tmp_path)
    checkpoint = checkpoint_trainer(loaded, tmp_path / "snap", settings.trainer, settings_record=settings.resolved(),
                                    policy_version=0)
    target = write_snapshot(checkpoint, tmp_path / "s.safetensors", model="tiny", step=0, policy_version=0)
    with pytest.raises(ValueError, match="rank 4"):
        fresh_trainer(tiny_dir, Settings(lora_rank=8, lora_alpha=8.0, device="cpu", gradient_checkpointing=False,
                                         lora_init_adapter=target).trainer)


def test_a_snapshot_written_before_run_steps_were_recorded_reads_its_trainer_step(tiny_dir: Path,
                                                                                   tmp_path: Path) -> None:
    """Snapshots of the first format (no run step in the header, like the self-play run's of step 5) still load."""
    from safetensors import safe_open
    from safetensors.torch import save_file

    loaded = fresh_trainer(tiny_dir, lora_settings(tmp_path).trainer)
    settings = lora_settings(tmp_path)
    checkpoint = checkpoint_trainer(loaded, tmp_path / "snap", settings.trainer, settings_record=settings.resolved(),
                                    policy_version=5)
    target = write_snapshot(checkpoint, tmp_path / "new.safetensors", model="tiny", step=5, policy_version=5)
    with safe_open(str(target), framework="pt") as handle:
        metadata = {key: value for key, value in (handle.metadata() or {}).items() if key != "run_step"}
        tensors = {key: handle.get_tensor(key) for key in handle.keys()}  # noqa: SIM118 (safe_open has no iter)
    save_file(tensors, str(tmp_path / "old.safetensors"), metadata=metadata)
    assert snapshot_metadata(tmp_path / "old.safetensors")["run_step"] == 5
