"""`azr config show`: print the resolved settings (flags > AZR_* > config file > profile > field defaults), secrets
masked; with `--describe`, each setting's description (which names the paper's or the released code's value where
they differ) and where its value came from (a preset's line cites its own source: docs/paper-vs-code.md)."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated

import typer

from azr.cli.choices import ProfileChoice
from azr.cli.settings_options import cli_settings, command_line_values, config_option, env_var, setting_option
from services.settings import PROFILE_DEFAULTS, Settings, settings_fields
from services.settings.config_file import config_file_comments, read_config_file

config_app = typer.Typer(help="Inspect the resolved settings.", no_args_is_help=True)


@config_app.command("show")
def show(
    ctx: typer.Context,
    profile: Annotated[ProfileChoice | None, setting_option("profile", "Settings profile.")] = None,
    config: Annotated[Path | None, config_option()] = None,
    describe: Annotated[bool, typer.Option(
        "--describe", help="Print each field's description and the source of its value too.")] = False,
) -> None:
    """Print every setting as resolved from the flags, AZR_* variables, the config file, the profile's and the
    fields' defaults, as JSON (secrets masked). Invalid settings exit with status 2, naming the value and its source."""
    flags = command_line_values(ctx, profile=profile)
    settings = cli_settings(config, **flags)
    resolved = settings.resolved()
    if describe:
        fields = settings_fields()
        sources = value_sources(settings, config, flags)
        resolved = {k: {"value": v, "description": fields[k].description, "source": sources[k]}
                    for k, v in resolved.items()}
    typer.echo(json.dumps(resolved, indent=2, sort_keys=True))


def value_sources(settings: Settings, config_file: Path | None, flags: Mapping[str, object]) -> dict[str, str]:
    """Where each setting's value came from, by field: the command line, an AZR_* variable, the config file (with
    the comment at the end of its line, where a preset cites the value's source), the profile's default or the
    field's own default."""
    file_keys = set(read_config_file(config_file, settings_fields())) if config_file is not None else set()
    comments = config_file_comments(config_file) if config_file is not None else {}
    sources = {}
    for field in settings_fields():
        if field in flags:
            sources[field] = "command line"
        elif env_var(field) in os.environ:
            sources[field] = f"environment variable {env_var(field)}"
        elif field in file_keys:
            cited = f": {comments[field]}" if field in comments else ""
            sources[field] = f"config file {config_file}{cited}"
        elif field in PROFILE_DEFAULTS.get(settings.run.profile, {}):
            sources[field] = f"{settings.run.profile} profile default"
        else:
            sources[field] = "field default"
    return sources
