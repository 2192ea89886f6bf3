"""The llama.cpp engine's scratch directories: one per engine, removed on close or exit, and swept after a crash
only when made on this host by a process that is gone."""

from __future__ import annotations

import gc
import os
import subprocess
import sys
from pathlib import Path

from services.inference import engine_scratch
from services.inference.engine_choice import CHECKPOINT_MARKER, gguf_for, remove_legacy_ggufs
from services.inference.engine_scratch import EngineScratch, sweep_abandoned
from trainer_svc.checkpoints import TRAINER_STATE_FILE


def dead_pid() -> int:
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    return process.pid


def test_a_scratch_directory_is_made_on_first_use_and_removed(tmp_path: Path) -> None:
    scratch = EngineScratch(tmp_path / "root")
    assert not (tmp_path / "root").exists()  # nothing made until a file needs it
    (scratch.path / "base.gguf").write_bytes(b"x")
    assert scratch.holds(scratch.path / "base.gguf") and not scratch.holds(tmp_path / "base.gguf")
    made = scratch.path
    assert made.name.startswith(f"{engine_scratch._host()}-{os.getpid()}-")
    scratch.remove()
    assert not made.exists() and list((tmp_path / "root").iterdir()) == []


def test_an_engine_never_closed_loses_its_directory_when_collected(tmp_path: Path) -> None:
    scratch = EngineScratch(tmp_path)
    made = scratch.path
    del scratch
    gc.collect()
    assert not made.exists()


def test_the_sweep_removes_only_this_hosts_directories_of_ended_processes(tmp_path: Path) -> None:
    host = engine_scratch._host()
    ended = tmp_path / f"{host}-{dead_pid()}-abc123"
    running = tmp_path / f"{host}-{os.getppid()}-def456"  # the test runner's parent: alive
    mine = tmp_path / f"{host}-{os.getpid()}-ghi789"
    other_host = tmp_path / f"{host}x-{dead_pid()}-jkl012"  # another pod or container sharing the cache
    stray = tmp_path / "notes-of-a-user"
    for directory in (ended, running, mine, other_host, stray):
        directory.mkdir()
        (directory / "push-v000003.gguf").write_bytes(b"x")
    assert sweep_abandoned(tmp_path) == [ended]
    assert not ended.exists()
    assert all(d.exists() for d in (running, mine, other_host, stray))


def test_a_checkpoint_directory_gets_no_cached_gguf(tmp_path: Path) -> None:
    """A run's checkpoint is converted by the engine into its scratch directory, never into the shared cache."""
    assert CHECKPOINT_MARKER == TRAINER_STATE_FILE
    checkpoint = tmp_path / "checkpoints" / "v000002"
    checkpoint.mkdir(parents=True)
    (checkpoint / "config.json").write_text("{}")
    (checkpoint / TRAINER_STATE_FILE).write_bytes(b"state")
    assert gguf_for(checkpoint, cache_root=tmp_path / "cache") is None
    assert not (tmp_path / "cache").exists()


def test_earlier_versions_checkpoint_and_push_ggufs_are_removed_from_the_cache(tmp_path: Path) -> None:
    gguf = tmp_path / "gguf"
    gguf.mkdir()
    kept = ["tiny-v1-de51f979d42c-f819fa199c68.gguf", "smollm2-hf-v1-b179c9523d0e-0123456789ab.gguf",
            "v2-0627b445deb2.gguf"]
    legacy = ["v000002-0627b445deb2.gguf", "v000002-0627b445deb2.q8_0.gguf", ".pushed-v000003-0608e9bfbb65.new",
              ".pushed-tiny-v1-de51f979d42c-f819fa199c68.new"]
    for name in kept + legacy:
        (gguf / name).write_bytes(b"x")
    assert sorted(p.name for p in remove_legacy_ggufs(tmp_path)) == sorted(legacy)
    assert sorted(p.name for p in gguf.iterdir()) == sorted(kept)
    assert remove_legacy_ggufs(tmp_path / "empty") == []
