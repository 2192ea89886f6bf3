"""`--model Org/Name`: a Hugging Face hub id resolves through the local HF cache only (HF_HUB_CACHE or HF_HOME/hub,
`models--Org--Name/snapshots/<commit>/` with blobs and refs as huggingface_hub lays them out), never the network; an
id that is not cached is a clear error, and `azr run` stops on it with status 2."""

from __future__ import annotations

import hashlib
import os
import socket
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from azr.cli.main import app
from services.inference.model_registry import ModelUnavailable, resolve_model

COMMIT = "5f0b2c7e9d1a3b4c6d8e0f1a2b3c4d5e6f708192"
"""The snapshot's commit hash (any 40 hex digits: nothing checks it against a hub)."""


def lay_out_hub_cache(hub_dir: Path, repo_id: str, model_dir: Path, refs: tuple[str, ...] = ("main",)) -> Path:
    """Put `model_dir`'s files into `hub_dir` as the HF cache keeps a download: content-addressed blobs, a snapshot
    of relative symlinks to them, and refs naming the commit. Returns the snapshot directory."""
    repo = hub_dir / f"models--{repo_id.replace('/', '--')}"
    snapshot = repo / "snapshots" / COMMIT
    (repo / "blobs").mkdir(parents=True)
    snapshot.mkdir(parents=True)
    for source in sorted(model_dir.iterdir()):
        if not source.is_file():
            continue
        blob = repo / "blobs" / hashlib.sha256(source.read_bytes()).hexdigest()
        blob.write_bytes(source.read_bytes())
        (snapshot / source.name).symlink_to(os.path.relpath(blob, snapshot))
    (repo / "refs").mkdir()
    for ref in refs:
        (repo / "refs" / ref).write_text(COMMIT)
    return snapshot


@pytest.fixture()
def no_network(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Every outgoing connection attempt is recorded and refused."""
    attempts: list[Any] = []

    def refuse(self: socket.socket, address: Any) -> None:
        attempts.append(address)
        raise OSError("network access during a test of offline model resolution")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)
    return attempts


@pytest.fixture()
def hub_cache(tmp_path: Path, tiny_dir: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """HF_HUB_CACHE holding the tiny model as `Org/Tiny` (refs main and v1)."""
    hub = tmp_path / "hub"
    lay_out_hub_cache(hub, "Org/Tiny", tiny_dir, refs=("main", "v1"))
    monkeypatch.delenv("HF_HOME", raising=False)
    monkeypatch.setenv("HF_HUB_CACHE", str(hub))
    return hub


def test_a_cached_hub_id_resolves_to_its_snapshot_and_loads(hub_cache: Path, tiny_dir: Path,
                                                            no_network: list[Any]) -> None:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    snapshot = resolve_model("Org/Tiny")
    assert snapshot == hub_cache / "models--Org--Tiny" / "snapshots" / COMMIT
    assert (snapshot / "config.json").is_symlink() and (snapshot / "config.json").read_bytes() == (
        tiny_dir / "config.json").read_bytes()
    for pinned in ("Org/Tiny@v1", f"Org/Tiny@{COMMIT}"):  # a tag or branch ref, and the commit itself
        assert resolve_model(pinned) == snapshot
    model = AutoModelForCausalLM.from_pretrained(str(snapshot), local_files_only=True)
    tokenizer = AutoTokenizer.from_pretrained(str(snapshot), local_files_only=True)
    assert model.config.model_type == "qwen2" and tokenizer("def f(x):")["input_ids"]
    assert no_network == []


def test_hf_home_is_honoured_when_hf_hub_cache_is_unset(tmp_path: Path, tiny_dir: Path, no_network: list[Any],
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    snapshot = lay_out_hub_cache(tmp_path / "hf-home" / "hub", "Qwen/Qwen2.5-Coder-0.5B-Instruct", tiny_dir)
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    monkeypatch.delenv("HUGGINGFACE_HUB_CACHE", raising=False)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))
    assert resolve_model("Qwen/Qwen2.5-Coder-0.5B-Instruct") == snapshot
    assert no_network == []


def test_an_uncached_hub_id_is_a_clear_error_without_network(hub_cache: Path, no_network: list[Any]) -> None:
    with pytest.raises(ModelUnavailable) as raised:
        resolve_model("Org/Absent")
    message = str(raised.value)
    assert "'Org/Absent' is not in the local Hugging Face cache" in message and str(hub_cache) in message
    assert "models--Org--Absent/snapshots/" in message and "hf download Org/Absent" in message
    with pytest.raises(ModelUnavailable, match="'Org/Tiny@v2' is not in the local Hugging Face cache"):
        resolve_model("Org/Tiny@v2")  # cached, but not at that revision
    assert no_network == []


def test_a_snapshot_without_config_is_refused(hub_cache: Path, no_network: list[Any]) -> None:
    (hub_cache / "models--Org--Tiny" / "snapshots" / COMMIT / "config.json").unlink()
    with pytest.raises(ModelUnavailable, match="has no config.json"):
        resolve_model("Org/Tiny")


def test_azr_run_stops_on_an_uncached_hub_id_with_status_2(hub_cache: Path, tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, ["run", "--model", "Org/Absent", "--steps", "0"],
                                env={"AZR_RUN_API_PORT": "0"})
    assert result.exit_code == 2, result.output
    assert "'Org/Absent' is not in the local Hugging Face cache" in " ".join(result.output.split())
    assert not (tmp_path / "runs").exists()  # stopped before the run directory was made
