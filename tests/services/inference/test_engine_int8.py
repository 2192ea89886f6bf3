"""`local_engine_int8`: the local engine generating with int8 Linear layers — what is quantized, what it samples
from, and that a weight update keeps it."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import torch

from services.inference.local_engine import LocalEngine, ends_with_module_path, load_causal_lm, quantize_linear_int8
from services.ports import InferenceError, SamplingParams
from services.settings import Settings


@pytest.fixture(scope="module")
def int8_engine(tiny_dir: Path) -> LocalEngine:
    return LocalEngine(tiny_dir, device="cpu", seed=123, int8_linear=True)


def quantized_linears(model: torch.nn.Module) -> tuple[int, int]:
    """(int8 dynamic Linear modules, float Linear modules) in `model`."""
    int8 = sum(isinstance(m, torch.ao.nn.quantized.dynamic.Linear) for m in model.modules())
    plain = sum(type(m) is torch.nn.Linear for m in model.modules())
    return int8, plain


def test_every_linear_layer_is_int8_and_the_rest_stays_float32(int8_engine: LocalEngine,
                                                                tiny_engine: LocalEngine) -> None:
    int8, plain = quantized_linears(int8_engine.model)
    assert plain == 0 and int8 == quantized_linears(tiny_engine.model)[1] > 0
    assert int8_engine.model.get_input_embeddings().weight.dtype is torch.float32
    assert int8_engine.model_info()["dtype"] == "float32 + int8 Linear"


def test_named_linear_layers_can_stay_float32(tiny_dir: Path) -> None:
    model = quantize_linear_int8(load_causal_lm(tiny_dir, torch.device("cpu"), torch.float32),
                                 keep_float=["lm_head"])
    assert type(model.get_submodule("lm_head")) is torch.nn.Linear
    int8, plain = quantized_linears(model)
    assert plain == 1 and int8 > 0


def test_kept_names_match_whole_path_components() -> None:
    assert ends_with_module_path("model.layers.2.mlp.down_proj", ["layers.2.mlp.down_proj"])
    assert ends_with_module_path("model.layers.2.mlp.down_proj", ["down_proj"])
    assert ends_with_module_path("lm_head", ["lm_head"])
    assert not ends_with_module_path("model.layers.12.mlp.down_proj", ["2.mlp.down_proj", "layers.2.mlp.down_proj"])
    assert not ends_with_module_path("model.layers.2.mlp.down_proj", ["proj", "mlp"])


def test_the_engine_keeps_the_named_layers_float32_through_a_weight_update(tiny_dir: Path) -> None:
    settings = Settings(local_engine_int8=True, local_engine_dtype="float32", device="cpu",
                        local_engine_int8_keep_float=["down_proj"])
    engine = LocalEngine.from_settings(tiny_dir, settings.inference, settings.run)
    for model in (engine.model, engine._load(tiny_dir, progress_bar=False)):  # what a weight update loads
        down = {name: type(m) for name, m in model.named_modules() if name.endswith("down_proj")}
        assert down and set(down.values()) == {torch.nn.Linear}
        assert quantized_linears(model)[0] > 0
    assert engine.model_info()["dtype"] == "float32 + int8 Linear (float32: down_proj)"


def test_per_channel_weights_take_one_scale_per_output_row_and_move_the_outputs_less(tiny_dir: Path) -> None:
    float32 = load_causal_lm(tiny_dir, torch.device("cpu"), torch.float32)
    # one output row of a projection 50x larger than the rest: one scale per tensor rounds the others to a few levels
    projection = float32.get_submodule("model.layers.0.mlp.gate_proj")
    with torch.no_grad():
        projection.weight[0] *= 50
    x = torch.randn(3, projection.in_features)
    with torch.no_grad():
        exact = projection(x)[:, 1:]
    per_tensor = quantize_linear_int8(copy.deepcopy(float32)).get_submodule("model.layers.0.mlp.gate_proj")
    per_channel = quantize_linear_int8(float32, per_channel=True).get_submodule("model.layers.0.mlp.gate_proj")
    assert per_tensor.weight().qscheme() is torch.per_tensor_affine
    assert per_channel.weight().qscheme() is torch.per_channel_affine
    assert per_channel.weight().q_per_channel_scales().numel() == projection.out_features
    error = {name: float((module(x)[:, 1:] - exact).abs().mean())
             for name, module in (("tensor", per_tensor), ("channel", per_channel))}
    assert error["channel"] < error["tensor"] / 5, error


def test_the_engine_quantizes_per_channel_from_settings_through_a_weight_update(tiny_dir: Path) -> None:
    settings = Settings(local_engine_int8=True, local_engine_dtype="float32", device="cpu",
                        local_engine_int8_per_channel=True, local_engine_int8_keep_float=["layers.0.mlp.down_proj"])
    engine = LocalEngine.from_settings(tiny_dir, settings.inference, settings.run)
    for model in (engine.model, engine._load(tiny_dir, progress_bar=False)):  # what a weight update loads
        schemes = {m.weight().qscheme() for m in model.modules()
                   if isinstance(m, torch.ao.nn.quantized.dynamic.Linear)}
        assert schemes == {torch.per_channel_affine}
        assert type(model.get_submodule("model.layers.0.mlp.down_proj")) is torch.nn.Linear
    assert engine.model_info()["dtype"] == "float32 + int8 Linear (per channel; float32: layers.0.mlp.down_proj)"


def test_its_log_probs_stay_close_to_the_float32_models_on_its_own_samples(int8_engine: LocalEngine,
                                                                           tiny_engine: LocalEngine) -> None:
    """The tokens it samples, scored by the float32 model (what the trainer recomputes): close, not equal."""
    prompt = tiny_engine.prompt_ids("def f(x):\n    return x * 2\n# f(3) ==")
    [[sample]] = int8_engine.generate([prompt], SamplingParams(max_new_tokens=24, temperature=1.0, seed=5))
    exact = tiny_engine.forward_logprobs(prompt, sample.output_ids)
    gaps = [abs(a - b) for a, b in zip(sample.logprobs, exact, strict=True)]
    assert len(gaps) == 24
    assert max(gaps) < 0.1, gaps
    assert max(gaps) > 0  # int8 really ran: the float32 model gives other numbers
    # activations are quantized per batch, so a teacher-forced int8 pass (one batch of every position) scales them
    # differently from decoding (one position at a time): close to its own samples' log-probs, not equal
    teacher_forced = int8_engine.forward_logprobs(prompt, sample.output_ids)
    assert sample.logprobs == pytest.approx(teacher_forced, abs=0.05)


def test_a_weight_update_is_served_int8_too(tiny_dir: Path, perturbed_dir: Path) -> None:
    engine = LocalEngine(tiny_dir, device="cpu", seed=1, int8_linear=True)
    engine.update_weights(str(perturbed_dir), 3)
    assert engine.weight_version() == "3" and quantized_linears(engine.model)[1] == 0
    assert engine.model_info()["model_path"] == str(perturbed_dir)


def test_settings_turn_it_on_in_float32_and_other_devices_or_dtypes_are_refused(tiny_dir: Path) -> None:
    settings = Settings(local_engine_int8=True, local_engine_dtype="auto", device="cpu")
    engine = LocalEngine.from_settings(tiny_dir, settings.inference, settings.run)
    assert engine.int8_linear and engine.dtype is torch.float32
    with pytest.raises(InferenceError, match="int8 Linear layers need a CPU engine in float32"):
        LocalEngine(tiny_dir, device="cpu", dtype=torch.bfloat16, int8_linear=True)
