"""bench/engine_gap.py's ranking of the MLP down projections by how far their inputs' largest channel stands above
the median one: what `local_engine_int8_keep_float` is chosen from."""

from __future__ import annotations

import sys
from pathlib import Path

import torch

REPO_ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO_ROOT))  # bench/ is a directory of scripts, not an installed package

from bench.engine_gap import down_proj_outliers  # noqa: E402
from services.inference.local_engine import load_causal_lm  # noqa: E402
from services.inference.tiny_model import tiny_model_dir  # noqa: E402


def test_the_layer_with_a_huge_activation_channel_ranks_first() -> None:
    model = load_causal_lm(tiny_model_dir(), torch.device("cpu"), torch.float32)
    layers = [name for name, _ in model.named_modules() if name.endswith("mlp.down_proj")]
    assert len(layers) >= 2
    sequences = [[1, 5, 9, 13, 2], [3, 4, 7]]
    before = {name: ratio for name, _, ratio in down_proj_outliers(model, sequences)}
    outlier = layers[-1]
    with torch.no_grad():  # one channel of the last layer's down projection input, 1000x
        model.get_submodule(outlier.replace("down_proj", "up_proj")).weight[3] *= 1000
    ranked = down_proj_outliers(model, sequences)
    assert [name for name, _, _ in ranked][0] == outlier
    assert ranked[0][2] > 100 * before[outlier]
    assert sorted(name for name, _, _ in ranked) == sorted(layers)
    assert not any(module._forward_hooks for module in model.modules())  # the hooks are removed
