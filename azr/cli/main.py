"""The `azr` console command (also `python -m azr`). Each service registers its commands here.

One exit-status convention for all commands (azr/cli/exit_codes.py): 0 done, 1 runtime failure, 2 usage or bad
input. One settings convention (azr/cli/settings_options.py): flags > AZR_* > config file > profile defaults.
"""

from __future__ import annotations

import sys
from typing import Any

import typer

from azr.cli.config_cmd import config_app
from azr.cli.coordinator_cmd import coordinator
from azr.cli.db_cmd import db_app
from azr.cli.eval_cmd import eval_app
from azr.cli.executor_cmd import validate, worker_app
from azr.cli.exit_codes import EXIT_FAILURE
from azr.cli.parse_cmd import parse
from azr.cli.plot_cmd import plot
from azr.cli.run_cmd import run
from azr.cli.samples_cmd import samples
from azr.cli.seeds_cmd import seeds_app
from azr.cli.serve_cmd import serve_app
from azr.cli.trainer_cmd import trainer
from azr.cli.trend_cmd import trend
from azr.cli.warmup_cmd import warmup
from executor_svc.errors import SandboxUnavailable


class AzrApp(typer.Typer):
    """The command group; a sandbox that cannot confine model code here (no bubblewrap and a kernel that refuses
    unprivileged user namespaces) ends any command with its reason and the install command, status 1, no traceback."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        try:
            return super().__call__(*args, **kwargs)
        except SandboxUnavailable as error:
            typer.echo(f"error: {error}", err=True)
            sys.exit(EXIT_FAILURE)


app = AzrApp(
    name="azr",
    help="Absolute Zero Reasoner: self-play code reasoning with a code executor as the only source of truth.",
    epilog="Exit status of every command: 0 done, 1 runtime failure, 2 usage or bad input "
           "(azr/cli/exit_codes.py). Settings: flags > AZR_* variables > --config FILE (AZR_CONFIG) > profile "
           "defaults.",
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
app.command("warmup")(warmup)
app.command("samples")(samples)
app.add_typer(db_app, name="db")
app.add_typer(seeds_app, name="seeds")
app.add_typer(eval_app, name="eval")
app.command("plot")(plot)
app.command("parse")(parse)
app.command("trend")(trend)
