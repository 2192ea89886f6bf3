"""bench/trainer.py and bench/model_flops.py: the baseline step is a correct LM step either way it computes logits,
and the MFU arithmetic counts what its docstring says."""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from torch import nn

from bench.model_flops import head_weights, matmul_weights, mfu, peak_for_name, peak_tflops, update_flops
from bench.trainer import load, make_episodes, plain_step
from trainer_svc.ppo_update import make_optimizer


def bench_args(**overrides: object) -> argparse.Namespace:
    base = dict(model="tiny", device="cpu", per_group=1, prompt_len=24, response_len=12, micro_batch_tokens=4096,
                random_init=False, tokenizer=None, gradient_checkpointing=False, bf16=False)
    return argparse.Namespace(**{**base, **overrides})


def test_the_baseline_gives_the_same_update_with_full_or_response_only_logits() -> None:
    torch.set_num_threads(1)
    after = {}
    for logits in ("full", "response"):
        trainer, episodes = load(bench_args(), micro_batch_size=2)
        trainer.settings = trainer.settings.model_copy(update={"learning_rate": 1e-3})
        optimizer = make_optimizer(trainer.model, trainer.settings)
        before = {k: v.clone() for k, v in trainer.model.state_dict().items()}
        plain_step(trainer, optimizer, episodes, logits)
        after[logits] = {k: v.clone() for k, v in trainer.model.state_dict().items()}
    changed = [k for k in before if not torch.equal(before[k], after["full"][k])]
    assert changed, "the baseline step changed no weight"
    for name in before:
        torch.testing.assert_close(after["response"][name], after["full"][name], atol=1e-6, rtol=1e-5)


def test_random_init_needs_only_the_config_and_tokenizer(tmp_path: Path) -> None:
    """What a GPU box gets when the weights cannot be moved: config + tokenizer files, no safetensors."""
    from services.inference.tiny_model import tiny_model_dir

    for item in tiny_model_dir().iterdir():
        if item.is_file() and not item.name.endswith(".safetensors"):
            shutil.copy(item, tmp_path / item.name)
    with pytest.raises(OSError):
        load(bench_args(model=str(tmp_path)), micro_batch_size=2)
    random, _ = load(bench_args(model=str(tmp_path), random_init=True), micro_batch_size=2)
    loaded, _ = load(bench_args(), micro_batch_size=2)
    assert {k: v.shape for k, v in loaded.model.state_dict().items()} == \
        {k: v.shape for k, v in random.model.state_dict().items()}
    assert all(p.dtype == torch.float32 for p in random.model.parameters())
    shape_only = tmp_path / "shape"  # a second shape of the same family: its config alone, the tokenizer shared
    shape_only.mkdir()
    shutil.copy(tmp_path / "config.json", shape_only / "config.json")
    shared, _ = load(bench_args(model=str(shape_only), random_init=True, tokenizer=tmp_path), micro_batch_size=2)
    assert {k: v.shape for k, v in shared.model.state_dict().items()} == \
        {k: v.shape for k, v in random.model.state_dict().items()}


class TwoLayer(nn.Module):
    """A stand-in LM: config with 2 layers of width 8, two Linear blocks, an untied head of 8 x 32."""

    def __init__(self) -> None:
        super().__init__()
        self.config = argparse.Namespace(num_hidden_layers=2, hidden_size=8)
        self.embed = nn.Embedding(32, 8)
        self.blocks = nn.Sequential(nn.Linear(8, 16), nn.Linear(16, 8))
        self.head = nn.Linear(8, 32, bias=False)

    def get_output_embeddings(self) -> nn.Module:
        return self.head


def test_flops_count_body_weights_for_all_tokens_the_head_for_response_tokens_and_attention() -> None:
    model = TwoLayer()
    assert matmul_weights(model) == 8 * 16 + 16 * 8 + 8 * 32 and head_weights(model) == 8 * 32
    body, head, attention = 256, 256, 12 * 2 * 8
    expected = (6 * body * 10 + 6 * head * 4 + attention * 10**2) + (6 * body * 3 + 6 * head * 1 + attention * 3**2)
    assert update_flops(model, [(6, 4), (2, 1)]) == expected


def test_peak_lookup_and_mfu() -> None:
    assert peak_for_name("NVIDIA H100 80GB HBM3") == 989.0
    assert peak_for_name("NVIDIA H100 PCIe") == 756.0
    assert peak_for_name("NVIDIA H200") == 989.0 and peak_for_name("NVIDIA H20") == 148.0
    assert peak_for_name("Some Future GPU") is None
    assert peak_tflops(torch.device("cpu")) is None and peak_tflops(torch.device("cpu"), 10.0) == 10.0
    assert mfu(5e12, 1.0, 10.0) == pytest.approx(0.5)
    assert mfu(5e12, 1.0, None) is None


def test_random_episodes_cover_the_six_groups_with_varied_lengths() -> None:
    episodes = make_episodes(vocab=100, per_group=3, prompt_len=40, response_len=20)
    assert len(episodes) == 18 and len({(e.task_type, e.role) for e in episodes}) == 6
    assert len({len(e.prompt_ids) for e in episodes}) > 1 and all(30 <= len(e.prompt_ids) <= 50 for e in episodes)


@pytest.mark.slow
def test_the_fsdp_bench_runs_two_ranks_under_torchrun() -> None:
    script = Path(__file__).resolve().parents[2] / "bench" / "trainer_fsdp.py"
    out = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
                          str(script), "--model", "tiny", "--device", "cpu", "--per-group", "1", "--repeats", "1",
                          "--run-dir", "/tmp/azr-test-fsdp-bench"],
                         capture_output=True, text=True, timeout=300, env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert out.returncode == 0, out.stderr[-3000:]
    assert "FSDP trainer, 2 rank(s) on CPU, model tiny" in out.stdout
    rate = re.search(r"update [\d.]+ s \(median of 1\): ([\d.]+) response tokens/s", out.stdout)
    assert rate is not None and float(rate.group(1)) > 0, out.stdout
