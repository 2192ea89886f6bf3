"""Fixtures for the trainer tests: the tiny real model (built offline, cached) and episode factories."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from services.inference.tiny_model import tiny_model_dir
from services.settings import Settings


@pytest.fixture(scope="session")
def tiny_dir() -> Path:
    """The tiny Qwen2-family model's HF directory."""
    return tiny_model_dir()


@pytest.fixture()
def tiny_model(tiny_dir: Path) -> torch.nn.Module:
    """The tiny model, loaded fresh, in eval mode (no dropout, as the trainer runs it)."""
    from trainer_svc.resume import load_model_and_tokenizer

    model, _ = load_model_and_tokenizer(tiny_dir)
    return model.eval()


@pytest.fixture(autouse=True)
def _single_thread_torch() -> None:
    """Two shared cores: one intra-op thread keeps the tiny model fast and the numbers reproducible."""
    torch.set_num_threads(1)


@pytest.fixture
def cpu_settings(tmp_path: Path) -> Settings:
    """Trainer settings for tests: CPU in float32 (exact comparisons; bf16 autocast has its own test), a large lr so
    one update visibly moves the tiny model."""
    return Settings(device="cpu", learning_rate=1e-3, entropy_coef=0.0, weight_decay=0.0, micro_batch_size=4,
                    trainer_bf16_cpu=False,
                    run_root=tmp_path / "runs", run_id="t")
