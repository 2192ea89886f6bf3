"""Fixtures for the inference tests: the tiny model, a local engine over it, and a perturbed checkpoint."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from services.inference.local_engine import LocalEngine
from services.inference.tiny_model import tiny_model_dir


@pytest.fixture(scope="session")
def tiny_dir() -> Path:
    """The tiny model's HF directory (built offline in seconds on first use, cached after)."""
    return tiny_model_dir()


@pytest.fixture(scope="session")
def tiny_engine(tiny_dir: Path) -> LocalEngine:
    """A CPU engine over the tiny model. Tests that swap its weights must swap them back."""
    return LocalEngine(tiny_dir, device="cpu", seed=123)


@pytest.fixture(scope="session")
def perturbed_dir(tiny_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A new checkpoint: the tiny model with noise added to every weight, saved like the trainer saves one."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    target = tmp_path_factory.mktemp("perturbed")
    model = AutoModelForCausalLM.from_pretrained(str(tiny_dir), local_files_only=True)
    generator = torch.Generator().manual_seed(7)
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.add_(torch.randn(parameter.shape, generator=generator) * 0.5)
    model.save_pretrained(str(target), safe_serialization=True)
    AutoTokenizer.from_pretrained(str(tiny_dir), local_files_only=True).save_pretrained(str(target))
    return target
