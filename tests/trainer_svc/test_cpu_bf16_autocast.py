"""`trainer_bf16_cpu`: the update autocasts to bf16 on a CPU that multiplies bf16 natively, and stays PPO-exact."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from trainer_episodes import six_group_batch

from services.settings import Settings
from trainer_svc import policy_forward
from trainer_svc.policy_forward import bf16_autocast
from trainer_svc.resume import fresh_trainer

pytestmark = pytest.mark.precision  # CI runs these again with AZR_CPU_NATIVE_BF16=1

CPU = torch.device("cpu")


def test_it_applies_only_where_asked_and_native(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(policy_forward, "cpu_has_native_bf16", lambda: True)
    assert bf16_autocast(Settings(trainer_bf16_cpu=True).trainer, CPU)
    assert not bf16_autocast(Settings(trainer_bf16_cpu=False).trainer, CPU)
    # CUDA's switch: not the CPU's
    assert not bf16_autocast(Settings(trainer_bf16=True, trainer_bf16_cpu=False).trainer, CPU)
    assert bf16_autocast(Settings(trainer_bf16=True).trainer, torch.device("cuda"))
    monkeypatch.setattr(policy_forward, "cpu_has_native_bf16", lambda: False)
    assert not bf16_autocast(Settings(trainer_bf16_cpu=True).trainer, CPU)  # emulated bf16 would be slower
    assert (Settings(profile="embedded").trainer.trainer_bf16_cpu
            and not Settings(profile="distributed").trainer.trainer_bf16_cpu)


def test_the_update_runs_its_matmuls_in_bf16_and_its_first_epoch_ratio_is_one(
        tiny_dir: Path, cpu_settings: Settings, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(policy_forward, "cpu_has_native_bf16", lambda: True)  # autocast runs on any CPU, if slowly
    settings = cpu_settings.with_values(trainer_bf16_cpu=True)
    loaded = fresh_trainer(tiny_dir, settings.trainer)
    trainer = loaded.trainer
    assert trainer.bf16
    seen: list[torch.dtype] = []
    first_linear = next(m for m in trainer.model.modules() if isinstance(m, torch.nn.Linear))
    hook = first_linear.register_forward_hook(lambda _m, _i, out: seen.append(out.dtype))
    before = {name: p.detach().clone() for name, p in trainer.model.named_parameters()}
    try:
        report = trainer.update(six_group_batch(loaded.tokenizer, per_group=3))
    finally:
        hook.remove()
    assert seen and set(seen) == {torch.bfloat16}
    assert report.ratio_max == 1.0 and report.clip_fraction == 0.0  # π_old recomputed under the same autocast
    assert all(p.dtype is torch.float32 for p in trainer.model.parameters())  # fp32 master weights
    assert any(not torch.equal(before[name], p) for name, p in trainer.model.named_parameters())
