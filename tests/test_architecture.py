"""The architecture holds: the core (`services/`) imports no service folder and not the composition root (`azr/`);
service folders import the core only, never each other (import-linter's contracts in pyproject.toml)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LINT_IMPORTS = shutil.which("lint-imports", path=str(Path(sys.executable).parent)) or "lint-imports"


def lint_imports(cwd: Path, pythonpath: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(pythonpath)}
    return subprocess.run([LINT_IMPORTS, "--no-cache", "--config", str(cwd / "pyproject.toml")], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)


def test_the_repository_keeps_every_import_contract() -> None:
    done = lint_imports(ROOT, ROOT)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert "3 kept, 0 broken" in done.stdout


def test_the_contracts_catch_a_core_to_service_and_a_service_to_service_import(tmp_path: Path) -> None:
    """The same contracts over a copy of the layout with two forbidden imports added: both are reported."""
    for package in ("azr", "services", "executor_svc", "trainer_svc", "proposer_api", "solver_api"):
        (tmp_path / package).mkdir()
        (tmp_path / package / "__init__.py").write_text("")
    (tmp_path / "services" / "store.py").write_text("import executor_svc.sandbox\n")
    (tmp_path / "executor_svc" / "sandbox.py").write_text("")
    (tmp_path / "proposer_api" / "app.py").write_text("from solver_api import routes\n")
    (tmp_path / "solver_api" / "routes.py").write_text("")
    config = (ROOT / "pyproject.toml").read_text()
    (tmp_path / "pyproject.toml").write_text(config[config.index("[tool.importlinter]"):])
    done = lint_imports(tmp_path, tmp_path)
    assert done.returncode != 0
    assert "services.store -> executor_svc.sandbox" in done.stdout, done.stdout[-3000:]
    assert "proposer_api.app -> solver_api.routes" in done.stdout, done.stdout[-3000:]
    assert "1 kept, 2 broken" in done.stdout
