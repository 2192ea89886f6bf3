"""`azr serve inference` refuses a model it cannot resolve with a clear message (the serving path itself is
exercised over real HTTP in test_sglang_http.py)."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from azr.cli.main import app


def test_unknown_model_exits_with_the_reason(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["serve", "inference", "--model", str(tmp_path / "no-model")])
    assert result.exit_code == 2
    assert "unknown model" in result.output and "no config.json" in result.output
