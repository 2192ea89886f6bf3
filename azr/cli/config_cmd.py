"""`azr config show`: print the resolved settings (flags > AZR_* > config file > profile > field defaults), secrets
masked."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from azr.cli.choices import ProfileChoice
from azr.cli.settings_options import cli_settings, command_line_values, config_option, setting_option
from services.settings import Settings

config_app = typer.Typer(help="Inspect the resolved settings.", no_args_is_help=True)


@config_app.command("show")
def show(
    ctx: typer.Context,
    profile: Annotated[ProfileChoice | None, setting_option("profile", "Settings profile.")] = None,
    config: Annotated[Path | None, config_option()] = None,
    describe: Annotated[bool, typer.Option("--describe", help="Print each field's description too.")] = False,
) -> None:
    """Print every setting as resolved from the flags, AZR_* variables, the config file, the profile's and the
    fields' defaults, as JSON (secrets masked). Invalid settings exit with status 2, naming the value and its source."""
    resolved = cli_settings(config, **command_line_values(ctx, profile=profile)).resolved()
    if describe:
        fields = Settings.model_fields
        resolved = {k: {"value": v, "description": fields[k].description} for k, v in resolved.items()}
    typer.echo(json.dumps(resolved, indent=2, sort_keys=True))
