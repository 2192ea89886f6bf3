"""The project installs without setuptools printing anything a newcomer must read: `make setup`'s editable install
is a plain `.pth` line (the packages sit at the project root) and the metadata raises no deprecation warning.

Built with setuptools' own PEP 660 hook on a copy of the project, warnings recorded, as pip's isolated build runs it.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ["azr", "services", "proposer_api", "solver_api", "executor_svc", "trainer_svc"]

BUILD = """
import json, sys, warnings
from setuptools import build_meta
with warnings.catch_warnings(record=True) as seen:
    warnings.simplefilter("always")
    name = build_meta.build_editable(sys.argv[1])
print(json.dumps({"wheel": name, "warnings": [f"{w.category.__name__}: {w.message}" for w in seen]}))
"""


@pytest.fixture(scope="module")
def editable_build(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, object]]:
    pytest.importorskip("setuptools")
    project, out = tmp_path_factory.mktemp("project"), tmp_path_factory.mktemp("dist")
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, project / name)
    for package in PACKAGES:
        shutil.copytree(ROOT / package, project / package, ignore=shutil.ignore_patterns("__pycache__"))
    done = subprocess.run([sys.executable, "-c", BUILD, str(out)], cwd=project, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return out, json.loads(done.stdout.strip().splitlines()[-1])


def test_the_editable_build_raises_no_setuptools_warning(editable_build: tuple[Path, dict[str, object]]) -> None:
    _, report = editable_build
    assert report["warnings"] == []


def test_the_editable_wheel_is_one_path_line_to_the_project(editable_build: tuple[Path, dict[str, object]]) -> None:
    out, report = editable_build
    with zipfile.ZipFile(out / str(report["wheel"])) as wheel:
        pth = [name for name in wheel.namelist() if name.endswith(".pth")]
        assert len(pth) == 1, wheel.namelist()
        entries = wheel.read(pth[0]).decode().split()
    assert len(entries) == 1 and all((Path(entries[0]) / package / "__init__.py").is_file() for package in PACKAGES)
