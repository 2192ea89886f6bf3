"""What `azr run --resume` keeps is declared on the sections (`RESUMED`): each name is a field of the section that
declares it, the set is the one the run command used before the sections (its 48 names) and those added since, and
a resumed run takes those values from settings.json while the environment decides the rest."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from azr.cli.run_cmd import _resume_overrides
from services.settings import FIELD_PLACES, SECTIONS, load_settings, resumed_fields
from services.settings.section import SettingsSection, nested_section

BEFORE_THE_SECTIONS = set(json.loads((Path(__file__).resolve().parents[2] / "data" / "runs" / "pre-issue-38"
                                      / "resumed-fields.json").read_text()))
"""`azr/cli/run_cmd.py`'s RESUMED_FROM_FILE before issue 38 (kept beside the run directory saved then)."""
ADDED_SINCE = {"prompt_gradient"}
"""Settings added after issue 38 that fix an update's numbers, so a resumed run keeps them too."""


def every_section() -> list[type[SettingsSection]]:
    found: list[type[SettingsSection]] = []
    pending = list(SECTIONS.values())
    while pending:
        section = pending.pop()
        found.append(section)
        pending += [nested for info in section.model_fields.values()
                    if (nested := nested_section(info.annotation)) is not None]
    return found


def test_each_section_declares_only_its_own_settings() -> None:
    for section in every_section():
        assert section.RESUMED <= set(section.own_fields()), section.__name__


def test_the_sections_keep_what_the_run_command_kept() -> None:
    assert resumed_fields() == BEFORE_THE_SECTIONS | ADDED_SINCE
    assert resumed_fields() <= set(FIELD_PLACES)


def test_a_resumed_run_takes_the_declared_settings_from_the_file_and_the_rest_from_the_environment(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run_dir = tmp_path / "runs" / "r1"
    run_dir.mkdir(parents=True)
    saved = {"run_id": "r1", "batch_size": 5, "lora_rank": 8, "executor_workers": 3, "eval_limit": 7,
             "checkpoint_every": 4}
    (run_dir / "settings.json").write_text(json.dumps(saved))
    monkeypatch.setenv("AZR_BATCH_SIZE", "2")
    monkeypatch.setenv("AZR_CHECKPOINT_EVERY", "9")
    overrides = _resume_overrides(run_dir)
    assert set(overrides) == {"run_id", "run_root", "batch_size", "lora_rank", "executor_workers"}
    settings = load_settings(None, **overrides)
    kept = (settings.rollout.batch_size, settings.trainer.lora.lora_rank, settings.executor.executor_workers)
    assert kept == (5, 8, 3)
    assert (settings.trainer.checkpoint_every, settings.observability.eval_limit) == (9, 200)  # not kept: not declared
