"""`local_engine_dtype`: which dtype a settings-built local engine generates in."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from services.compute import cpu_features
from services.inference.local_engine import LocalEngine, engine_dtype, settings_engine_dtype
from services.settings import Settings

pytestmark = pytest.mark.precision  # CI runs these again with AZR_CPU_NATIVE_BF16=1

CPU, CUDA = torch.device("cpu"), torch.device("cuda")


def test_explicit_choices_are_kept_on_any_device() -> None:
    assert engine_dtype("float32", CUDA) is torch.float32
    assert engine_dtype("bfloat16", CPU) is torch.bfloat16


def test_auto_is_bf16_on_cuda_and_on_cpus_that_multiply_bf16_natively(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cpu_features, "cpu_has_native_bf16", lambda: False)
    assert engine_dtype("auto", CPU) is torch.float32  # emulated bf16 would be slower than float32
    assert engine_dtype("auto", CUDA) is torch.bfloat16
    monkeypatch.setattr(cpu_features, "cpu_has_native_bf16", lambda: True)
    assert engine_dtype("auto", CPU) is torch.bfloat16


def test_native_bf16_is_read_from_the_cpu_flags(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv(cpu_features.NATIVE_BF16_ENV, raising=False)
    real_read = Path.read_text
    flags = {"text": "flags\t\t: fpu sse avx512f avx512bw\n"}

    def read_text(self: Path, *args: object, **kwargs: object) -> str:
        return flags["text"] if str(self) == "/proc/cpuinfo" else real_read(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(Path, "read_text", read_text)
    assert not cpu_features.cpu_has_native_bf16()
    flags["text"] = "flags\t\t: fpu avx512f avx512_bf16 avx512_vnni\n"
    assert cpu_features.cpu_has_native_bf16()
    flags["text"] = "flags\t\t: fpu amx_bf16 amx_tile\n"
    assert cpu_features.cpu_has_native_bf16()


@pytest.mark.parametrize(("value", "native"), [("1", True), ("true", True), ("0", False), ("off", False)])
def test_the_environment_forces_either_answer_whatever_the_cpu(monkeypatch: pytest.MonkeyPatch, value: str,
                                                               native: bool) -> None:
    """AZR_CPU_NATIVE_BF16 makes any CPU take a bf16-capable CPU's paths (or not): the engine's auto dtype with it."""
    monkeypatch.setenv(cpu_features.NATIVE_BF16_ENV, value)
    assert cpu_features.cpu_has_native_bf16() is native
    expected = torch.bfloat16 if native else torch.float32
    assert engine_dtype("auto", torch.device("cpu")) == expected


def test_a_malformed_force_value_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(cpu_features.NATIVE_BF16_ENV, "maybe")
    with pytest.raises(ValueError, match="AZR_CPU_NATIVE_BF16"):
        cpu_features.cpu_has_native_bf16()


def test_an_unknown_choice_is_refused() -> None:
    with pytest.raises(ValueError, match="local_engine_dtype"):
        engine_dtype("float16", CPU)
    with pytest.raises(ValueError):
        Settings(local_engine_dtype="float16")  # type: ignore[arg-type]


def test_a_settings_built_engine_generates_in_the_chosen_dtype(tiny_dir: Path) -> None:
    settings = Settings(device="cpu", local_engine_dtype="bfloat16")
    assert settings_engine_dtype(settings.inference, settings.run) is torch.bfloat16
    engine = LocalEngine.from_settings(tiny_dir, settings.inference, settings.run)
    assert engine.model_info()["dtype"] == "bfloat16"
    assert next(engine.model.parameters()).dtype is torch.bfloat16
