"""bench/code_shape.py reads a tree: whole-Settings modules, sections, long files and functions, Any, contracts."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import code_shape  # noqa: E402

LONG_BODY = "\n".join(f"    x{i} = {i}" for i in range(70))


def test_a_tree_is_measured_as_written(tmp_path: Path) -> None:
    (tmp_path / "trainer_svc").mkdir()
    (tmp_path / "trainer_svc" / "loop.py").write_text(
        "from typing import Any\n\n"
        "def update(settings: Settings, data: Any) -> Any:\n" + LONG_BODY + "\n    return data\n")
    (tmp_path / "services" / "coordinator").mkdir(parents=True)
    (tmp_path / "services" / "coordinator" / "step.py").write_text(
        "def run(rollout: RolloutSettings | None) -> None:\n    pass\n" + "\n" * 320)
    (tmp_path / "pyproject.toml").write_text(
        "[[tool.importlinter.contracts]]\nname = 'a'\n[[tool.importlinter.contracts]]\nname = 'b'\n")
    shape = code_shape.measure("tree", tmp_path)
    assert shape.whole_settings_modules == {"trainer_svc": 1}
    assert shape.section_types["services/coordinator"] == {"RolloutSettings"}
    assert shape.long_functions == ["trainer_svc/loop.py:update (72)"]
    assert shape.long_files == ["services/coordinator/step.py (322)"]
    assert shape.any_names == 2 and shape.contracts == 2  # the import line is not counted
    table = code_shape.report([shape])
    assert "| functions over 60 lines | 1 |" in table and "| import contracts | 2 |" in table
