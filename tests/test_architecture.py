"""The architecture holds: the core (`services/`) imports no service folder and not the composition root (`azr/`);
service folders import the core only, never each other; in the composition root only `azr.factory` opens the
episode channels and builds rollouts; inside the core the layers run one way (coordinator and evaluation, rollouts,
the adapters and reporting, ports, records, algorithm, execution) and the pipeline reaches the store, the queues and
the engines through their ports only — import-linter's contracts in pyproject.toml."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LINT_IMPORTS = shutil.which("lint-imports", path=str(Path(sys.executable).parent)) or "lint-imports"
CORE_LAYERS = ("coordinator", "evaluation", "rollouts", "store", "queues", "inference", "reporting", "ports", "records",
               "algorithm", "execution")


def lint_imports(cwd: Path, pythonpath: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(pythonpath)}
    return subprocess.run([LINT_IMPORTS, "--no-cache", "--config", str(cwd / "pyproject.toml")], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)


def layout_copy(tmp_path: Path) -> Path:
    """The repository's top-level packages and the core's layers as empty packages, under the real contracts."""
    for package in ("azr", "services", "executor_svc", "trainer_svc", "proposer_api", "solver_api"):
        (tmp_path / package).mkdir()
        (tmp_path / package / "__init__.py").write_text("")
    for layer in CORE_LAYERS:
        (tmp_path / "services" / layer).mkdir()
        (tmp_path / "services" / layer / "__init__.py").write_text("")
    (tmp_path / "services" / "queues" / "factory.py").write_text("")
    for module in ("engine_rollouts", "http_rollouts"):
        (tmp_path / "services" / "rollouts" / f"{module}.py").write_text("")
    # the factory's own imports, which the contract's ignore_imports name (an unmatched one is an error)
    (tmp_path / "azr" / "factory").mkdir()
    (tmp_path / "azr" / "factory" / "__init__.py").write_text("")
    (tmp_path / "azr" / "factory" / "parts.py").write_text(
        "import services.queues\nimport services.queues.factory\n"
        "import services.rollouts.engine_rollouts\nimport services.rollouts.http_rollouts\n")
    config = (ROOT / "pyproject.toml").read_text()
    (tmp_path / "pyproject.toml").write_text(config[config.index("[tool.importlinter]"):])
    return tmp_path


def test_the_repository_keeps_every_import_contract() -> None:
    done = lint_imports(ROOT, ROOT)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert "6 kept, 0 broken" in done.stdout


def test_the_contracts_catch_a_core_to_service_and_a_service_to_service_import(tmp_path: Path) -> None:
    """The same contracts over a copy of the layout with two forbidden imports added: both are reported."""
    layout = layout_copy(tmp_path)
    (layout / "services" / "store.py").write_text("import executor_svc.sandbox\n")
    (layout / "executor_svc" / "sandbox.py").write_text("")
    (layout / "proposer_api" / "app.py").write_text("from solver_api import routes\n")
    (layout / "solver_api" / "routes.py").write_text("")
    done = lint_imports(layout, layout)
    assert done.returncode != 0
    assert "services.store -> executor_svc.sandbox" in done.stdout, done.stdout[-3000:]
    assert "proposer_api.app -> solver_api.routes" in done.stdout, done.stdout[-3000:]
    assert "4 kept, 2 broken" in done.stdout


def test_the_layers_contract_catches_a_cycle_even_one_under_type_checking(tmp_path: Path) -> None:
    """The cycle this contract was written against: a port naming a rollouts type under TYPE_CHECKING while rollouts
    import the port. Planted in a copy of the layout, the upward import is reported and the contract broken."""
    layout = layout_copy(tmp_path)
    (layout / "services" / "ports" / "rollouts.py").write_text(
        "from typing import TYPE_CHECKING\n\n"
        "if TYPE_CHECKING:\n"
        "    from services.rollouts.proposing import ProposeContext\n")
    (layout / "services" / "rollouts" / "proposing.py").write_text("from services.ports import rollouts\n")
    done = lint_imports(layout, layout)
    assert done.returncode != 0
    assert "inside the core, the layers run one way" in done.stdout
    assert "services.ports.rollouts -> services.rollouts.proposing" in done.stdout, done.stdout[-3000:]
    assert "5 kept, 1 broken" in done.stdout


def test_the_layers_contract_keeps_the_downward_imports(tmp_path: Path) -> None:
    """The same copy with only downward imports (each layer importing the one beneath): every contract kept, so the
    broken contract above is the cycle, not the layout."""
    layout = layout_copy(tmp_path)
    below = {"coordinator": "rollouts", "evaluation": "rollouts", "rollouts": "ports", "store": "ports",
             "queues": "ports", "inference": "ports", "reporting": "ports", "ports": "records", "records": "algorithm",
             "algorithm": "execution"}
    for layer, lower in below.items():
        (layout / "services" / layer / "uses.py").write_text(f"import services.{lower}\n")
    done = lint_imports(layout, layout)
    assert done.returncode == 0, done.stdout[-3000:]
    assert "6 kept, 0 broken" in done.stdout


def test_only_the_factory_opens_episode_channels_and_builds_rollouts(tmp_path: Path) -> None:
    """A command that opens the queues or builds its own rollouts breaks the composition root's contract; the same
    imports in `azr.factory`'s modules keep it."""
    layout = layout_copy(tmp_path)
    assert lint_imports(layout, layout).returncode == 0
    (layout / "azr" / "coordinator_cmd.py").write_text("from services.queues import open_episode_queue\n"
                                                     "from services.rollouts import engine_rollouts\n")
    done = lint_imports(layout, layout)
    assert done.returncode != 0
    assert "azr.coordinator_cmd -> services.queues" in done.stdout, done.stdout[-3000:]
    assert "azr.coordinator_cmd -> services.rollouts.engine_rollouts" in done.stdout, done.stdout[-3000:]
    assert "5 kept, 1 broken" in done.stdout


def test_the_adapters_reach_neither_up_nor_sideways(tmp_path: Path) -> None:
    """An adapter importing the pipeline it serves (the store importing the coordinator) and one adapter importing
    another (the queues importing the store) each break the layers contract."""
    layout = layout_copy(tmp_path)
    (layout / "services" / "store" / "rows.py").write_text("import services.coordinator\n")
    (layout / "services" / "queues" / "stream.py").write_text("import services.store\n")
    done = lint_imports(layout, layout)
    assert done.returncode != 0
    assert "services.store.rows -> services.coordinator" in done.stdout, done.stdout[-3000:]
    assert "services.queues.stream -> services.store" in done.stdout, done.stdout[-3000:]
    assert "5 kept, 1 broken" in done.stdout


def test_the_pipeline_uses_the_adapters_through_their_ports_only(tmp_path: Path) -> None:
    """The coordinator importing the store's adapter and rollouts importing an engine are refused, although both
    imports run downward: the pipeline sees the ports, the composition root picks the adapters."""
    layout = layout_copy(tmp_path)
    (layout / "services" / "coordinator" / "step.py").write_text("import services.store\n")
    (layout / "services" / "rollouts" / "solving.py").write_text("import services.inference\n")
    done = lint_imports(layout, layout)
    assert done.returncode != 0
    assert "the pipeline reaches the store, the episode channels and the engines" in done.stdout
    assert "services.coordinator.step -> services.store" in done.stdout, done.stdout[-3000:]
    assert "services.rollouts.solving -> services.inference" in done.stdout, done.stdout[-3000:]
    assert "5 kept, 1 broken" in done.stdout
