"""The `azr` console command (also `python -m services`). Each service registers its commands here."""

from __future__ import annotations

import typer

from services.cli.config_cmd import config_app
from services.cli.run_cmd import run

app = typer.Typer(
    name="azr",
    help="Absolute Zero Reasoner: self-play code reasoning with a code executor as the only source of truth.",
    no_args_is_help=True,
    add_completion=False,
)
app.add_typer(config_app, name="config")
app.command("run")(run)
