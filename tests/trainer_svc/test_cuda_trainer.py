"""The trainer on a CUDA GPU: bf16 autocast updates with fp32 master weights move log-probabilities the right way and
agree with fp32 updates, and the FSDP path on NCCL (torchrun, one rank per GPU) equals the one-process update.

CI has no GPU, so these skip there, saying why; docs/testing.md ("On a GPU machine") gives the command for a GPU
machine.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from policy_probes import update_on_rewarded_pair
from safetensors.torch import load_file
from test_fsdp_update import (
    SETTINGS,
    assert_reports_match,
    assert_same_weights,
    run_torchrun,
    with_behaviour_logprobs,
    write_batch,
)
from trainer_episodes import six_group_batch
from transformers import AutoModelForCausalLM

from services.settings import Settings
from trainer_svc.ppo_update import PolicyTrainer
from trainer_svc.resume import fresh_trainer

pytestmark = [pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (CI machines have none)"),
              pytest.mark.slow]

CUDA_FP32 = {**SETTINGS, "device": "cuda", "trainer_bf16": False}
CUDA_BF16 = {**SETTINGS, "device": "cuda", "trainer_bf16": True}


def cuda_settings(tmp_path: Path, run_id: str, base: dict) -> Settings:
    return Settings(**base, run_root=tmp_path / "runs", run_id=run_id)


def weights(trainer: PolicyTrainer) -> dict[str, torch.Tensor]:
    return {k: v.detach().float().cpu().clone() for k, v in trainer.model.state_dict().items()}


def test_bf16_update_moves_log_probabilities_the_right_way_with_fp32_master_weights(tiny_dir: Path,
                                                                                     tmp_path: Path) -> None:
    settings = cuda_settings(tmp_path, "bf16", {**CUDA_BF16, "ppo_epochs": 1, "weight_decay": 0.0})
    loaded = fresh_trainer(tiny_dir, settings.trainer)
    trainer = loaded.trainer
    report, _, _ = update_on_rewarded_pair(trainer, loaded.tokenizer)
    assert all(p.dtype == torch.float32 and p.device.type == "cuda" for p in trainer.model.parameters())
    assert report.memory_kind == "cuda_max_allocated" and report.peak_memory_mb > 0
    assert report.clip_fraction == 0.0  # behaviour logprobs recomputed under the same autocast: ratio 1


def test_bf16_and_fp32_updates_agree(tiny_dir: Path, tmp_path: Path) -> None:
    """Same batch from the same weights: bf16 autocast and fp32 give the same loss and token counts, grad norms within
    a few percent, and weight changes pointing the same way."""
    runs = {}
    for name, base in (("fp32", CUDA_FP32), ("bf16", CUDA_BF16)):
        loaded = fresh_trainer(tiny_dir, cuda_settings(tmp_path, name, {**base, "ppo_epochs": 1}).trainer)
        batch = six_group_batch(loaded.tokenizer, 2)
        start = weights(loaded.trainer)
        report = loaded.trainer.update(batch)
        end = weights(loaded.trainer)
        runs[name] = (report, torch.cat([(end[k] - start[k]).flatten() for k in sorted(start)]))
    (fp32, delta32), (bf16, delta16) = runs["fp32"], runs["bf16"]
    assert (bf16.tokens, bf16.padded_tokens, bf16.micro_batches) == (fp32.tokens, fp32.padded_tokens,
                                                                     fp32.micro_batches)
    assert bf16.loss == pytest.approx(fp32.loss, rel=2e-2, abs=1e-3)
    assert bf16.entropy == pytest.approx(fp32.entropy, rel=2e-2)
    assert bf16.grad_norm == pytest.approx(fp32.grad_norm, rel=5e-2)
    cosine = torch.nn.functional.cosine_similarity(delta16, delta32, dim=0)
    assert float(cosine) > 0.9, f"bf16 and fp32 weight updates point different ways (cosine {float(cosine):.3f})"


def test_fsdp_on_nccl_equals_the_one_process_update(tiny_dir: Path, tmp_path: Path) -> None:
    """fp32 on one GPU: the torchrun/FSDP/NCCL trainer (two updates, a checkpoint and a restore between them) and the
    one-process trainer reach the same weights; then the bf16 mixed-precision FSDP run trains and checkpoints fp32
    weights that transformers loads."""
    reference_settings = Settings(**SETTINGS, run_root=tmp_path / "runs", run_id="reference")
    tokenizer_owner = fresh_trainer(tiny_dir, reference_settings.trainer)
    batch1 = with_behaviour_logprobs(six_group_batch(tokenizer_owner.tokenizer, 2), tiny_dir, reference_settings)
    batch2 = with_behaviour_logprobs(six_group_batch(tokenizer_owner.tokenizer, 3, policy_version=1), tiny_dir,
                                     reference_settings)
    files = [write_batch(tmp_path / "b1.jsonl", batch1), write_batch(tmp_path / "b2.jsonl", batch2)]

    single = fresh_trainer(tiny_dir, cuda_settings(tmp_path, "single", CUDA_FP32).trainer).trainer
    single_reports = [single.update(batch1).model_dump(mode="json")]
    after1 = weights(single)
    single_reports.append(single.update(batch2).model_dump(mode="json"))
    after2 = weights(single)

    run_dir = tmp_path / "runs" / "fsdp"
    out = run_torchrun(1, tiny_dir, run_dir, files, tmp_path / "report.json", settings=CUDA_FP32)
    assert out["world_size"] == 1
    assert_same_weights(load_file(run_dir / "checkpoints" / "v000001" / "model.safetensors"), after1, "v1")
    assert_same_weights(load_file(run_dir / "checkpoints" / "v000002" / "model.safetensors"), after2, "v2")
    for fsdp_report, single_report in zip(out["reports"], single_reports, strict=True):
        assert_reports_match(fsdp_report, single_report)
        assert fsdp_report["memory_kind"] == "cuda_max_allocated"

    mixed_dir = tmp_path / "runs" / "fsdp-bf16"
    mixed = run_torchrun(1, tiny_dir, mixed_dir, files[:1], tmp_path / "mixed.json", settings=CUDA_BF16)
    report = mixed["reports"][0]
    assert report["tokens"] == single_reports[0]["tokens"]
    assert report["grad_norm"] == pytest.approx(single_reports[0]["grad_norm"], rel=5e-2)
    saved = load_file(mixed_dir / "checkpoints" / "v000001" / "model.safetensors")
    assert all(t.dtype == torch.float32 for t in saved.values()), "FSDP keeps fp32 shards; bf16 is compute only"
    moved = max(float((saved[k] - v).abs().max()) for k, v in weights(tokenizer_owner.trainer).items() if k in saved)
    assert moved > 1e-4, "the bf16 FSDP update did not change the weights"
    AutoModelForCausalLM.from_pretrained(mixed_dir / "checkpoints" / "v000001", local_files_only=True)
