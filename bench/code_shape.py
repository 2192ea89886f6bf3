"""The code's shape at one or more git refs, side by side: how much configuration each component receives, files over
300 lines, functions over 60 lines, `Any` per thousand lines, import contracts (issue 38's before/after figures).

Usage: python bench/code_shape.py REF [REF ...]      e.g.  python bench/code_shape.py main issue-38

Each ref is read from `git archive`, never the working tree. Limits: "receives" is read from annotations (a parameter
or attribute typed `Settings` takes the whole run's configuration; one typed `TrainerSettings` takes that section),
not from the data flow; `Any` counts the name wherever it appears in the product folders' code, JSON edges included.
"""

from __future__ import annotations

import argparse
import ast
import io
import subprocess
import tarfile
import tempfile
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

PRODUCT = ("services", "proposer_api", "solver_api", "executor_svc", "trainer_svc", "azr")
COMPONENTS = ("services/coordinator", "services/rollouts", "services/algorithm", "services/inference", "services/store",
              "proposer_api", "solver_api", "executor_svc", "trainer_svc", "azr")
REPO = Path(__file__).resolve().parent.parent


@dataclass
class Shape:
    """One ref's figures."""

    ref: str
    lines: int = 0
    any_names: int = 0
    long_files: list[str] = field(default_factory=list)
    long_functions: list[str] = field(default_factory=list)
    whole_settings_modules: dict[str, int] = field(default_factory=dict)
    section_types: dict[str, set[str]] = field(default_factory=dict)
    contracts: int = 0


def checkout(ref: str, into: Path) -> Path:
    """The ref's files under ``into`` (product folders and pyproject only)."""
    archive = subprocess.run(["git", "-C", str(REPO), "archive", ref, *PRODUCT, "pyproject.toml"],
                             check=True, capture_output=True).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(into, filter="data")
    return into


def settings_types(tree: ast.Module) -> set[str]:
    """Names of settings classes this module uses in annotations (`Settings` = the whole configuration)."""
    names: set[str] = set()
    for node in ast.walk(tree):
        annotations = []
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            annotations = [a.annotation for a in (*node.args.args, *node.args.kwonlyargs) if a.annotation]
        elif isinstance(node, ast.AnnAssign):
            annotations = [node.annotation]
        for annotation in annotations:
            for sub in ast.walk(annotation):
                name = sub.id if isinstance(sub, ast.Name) else sub.value if isinstance(sub, ast.Constant) else None
                if isinstance(name, str):
                    names |= {part for part in name.replace("|", " ").replace("[", " ").split()
                              if part.endswith("Settings") and part not in ("BaseSettings",)}
    return names


def measure(ref: str, root: Path) -> Shape:
    shape = Shape(ref)
    for path in sorted(p for folder in PRODUCT for p in (root / folder).rglob("*.py")):
        relative = path.relative_to(root).as_posix()
        text = path.read_text()
        code_lines = [line for line in text.splitlines() if line.strip()]
        shape.lines += len(code_lines)
        if len(text.splitlines()) > 300:
            shape.long_files.append(f"{relative} ({len(text.splitlines())})")
        tree = ast.parse(text)
        shape.any_names += sum(1 for node in ast.walk(tree)
                               if (isinstance(node, ast.Name) and node.id == "Any")
                               or (isinstance(node, ast.Attribute) and node.attr == "Any"))
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.end_lineno:
                length = node.end_lineno - node.lineno + 1
                if length > 60:
                    shape.long_functions.append(f"{relative}:{node.name} ({length})")
        component = next((c for c in COMPONENTS if relative.startswith(c + "/")), None)
        if component is None or relative.startswith("services/settings"):
            continue
        used = settings_types(tree)
        shape.section_types.setdefault(component, set()).update(used - {"Settings"})
        if "Settings" in used:
            shape.whole_settings_modules[component] = shape.whole_settings_modules.get(component, 0) + 1
    pyproject = tomllib.loads((root / "pyproject.toml").read_text())
    shape.contracts = len(pyproject.get("tool", {}).get("importlinter", {}).get("contracts", []))
    return shape


def report(shapes: list[Shape]) -> str:
    refs = [s.ref for s in shapes]
    rows = [f"| figure | {' | '.join(refs)} |", "|---|" + "---|" * len(refs)]

    def row(name: str, values: list[object]) -> None:
        rows.append(f"| {name} | {' | '.join(str(v) for v in values)} |")

    row("product lines (non-blank)", [s.lines for s in shapes])
    row("files over 300 lines", [len(s.long_files) for s in shapes])
    row("functions over 60 lines", [len(s.long_functions) for s in shapes])
    row("`Any` per kloc", [f"{1000 * s.any_names / s.lines:.1f}" for s in shapes])
    row("import contracts", [s.contracts for s in shapes])
    row("modules taking the whole `Settings`", [sum(s.whole_settings_modules.values()) for s in shapes])
    for component in COMPONENTS:
        cells = []
        for s in shapes:
            sections = ", ".join(sorted(s.section_types.get(component, ()))) or "-"
            cells.append(f"{s.whole_settings_modules.get(component, 0)} / {sections}")
        row(f"{component}: modules taking `Settings` / sections named", cells)
    details = []
    for s in shapes:
        details.append(f"\n{s.ref}: files over 300 lines: {', '.join(s.long_files) or 'none'}")
        details.append(f"{s.ref}: functions over 60 lines: {', '.join(s.long_functions) or 'none'}")
    return "\n".join(rows + details)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("refs", nargs="+", help="git refs to measure, in the table's column order")
    args = parser.parse_args()
    shapes = []
    for ref in args.refs:
        with tempfile.TemporaryDirectory() as tmp:
            shapes.append(measure(ref, checkout(ref, Path(tmp))))
    print(report(shapes))


if __name__ == "__main__":
    main()
