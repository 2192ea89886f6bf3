"""`azr config show`: print the resolved settings of a profile, secrets masked."""

from __future__ import annotations

import json
from typing import Annotated, Optional

import typer

from services.settings import Settings

config_app = typer.Typer(help="Inspect the resolved settings.", no_args_is_help=True)


@config_app.command("show")
def show(
    profile: Annotated[
        Optional[str], typer.Option(help="embedded or distributed (default: AZR_PROFILE, else embedded).")
    ] = None,
    describe: Annotated[bool, typer.Option("--describe", help="Print each field's description too.")] = False,
) -> None:
    """Print every setting as resolved from defaults, the profile and AZR_* variables, as JSON."""
    overrides = {"profile": profile} if profile else {}
    try:
        settings = Settings(**overrides)
    except ValueError as error:
        typer.echo(f"invalid settings: {error}", err=True)
        raise typer.Exit(2) from error
    resolved = settings.resolved()
    if describe:
        fields = Settings.model_fields
        resolved = {k: {"value": v, "description": fields[k].description} for k, v in resolved.items()}
    typer.echo(json.dumps(resolved, indent=2, sort_keys=True))
