"""The `azr` console command (also `python -m services`). Each service registers its commands here."""

from __future__ import annotations

import typer

from executor_svc.cli import validate, worker_app
from services.cli.config_cmd import config_app
from services.cli.coordinator_cmd import coordinator
from services.cli.db_cmd import db_app
from services.cli.parse_cmd import parse
from services.cli.eval_cmd import eval_app
from services.cli.plot_cmd import plot
from services.cli.run_cmd import run
from services.cli.seeds_cmd import seeds_app
from services.cli.serve_cmd import serve_app
from services.cli.trend_cmd import trend
from trainer_svc.cli import trainer

app = typer.Typer(
    name="azr",
    help="Absolute Zero Reasoner: self-play code reasoning with a code executor as the only source of truth.",
    no_args_is_help=True,
    add_completion=False,
)
app.add_typer(config_app, name="config")
app.command("run")(run)
app.command("coordinator")(coordinator)
app.command("validate")(validate)
app.add_typer(worker_app, name="worker")
app.add_typer(serve_app, name="serve")
app.command("trainer")(trainer)
app.add_typer(db_app, name="db")
app.add_typer(seeds_app, name="seeds")
app.add_typer(eval_app, name="eval")
app.command("plot")(plot)
app.command("parse")(parse)
app.command("trend")(trend)
