"""How `azr` commands turn their options into the settings, and the options that stand for settings.

Every command builds its settings with `cli_settings`: the values given on the command line are the top layer, then
the `AZR_*` environment, then the config file (`--config FILE` / AZR_CONFIG), then profile and field defaults
(services/settings/config_file.py). An option that stands for a setting (`setting_option`) shows its environment
variable and its default in `--help`; typer reads that variable too, but `command_line_values` passes on only what
was typed, so the environment keeps its own place beneath the flags (and beneath a resumed run's saved settings).
Settings that do not hold exit with status 2 (EXIT_BAD_INPUT) and say which value, from where, is wrong.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from enum import Enum
from pathlib import Path
from typing import Any

import typer
from pydantic import ValidationError

from azr.cli.exit_codes import bad_input
from services.settings import FIELD_PLACES, PROFILE_DEFAULTS, Settings, load_settings, settings_fields
from services.settings.config_file import CONFIG_ENV_VAR, ConfigFileError, read_config_file

OptionDefault = Any
"""What typer's `Option(...)` gives: a marker that stands as a parameter's default, whatever that parameter's type
(typer itself declares it `Any`, so that `config: Path | None = config_option()` type-checks)."""

CONFIG_HELP = ("TOML file of settings (keys: `azr config show` names; examples in configs/), beneath AZR_* variables "
               "and flags.")


def config_option() -> OptionDefault:
    """The `--config FILE` option (also AZR_CONFIG); the file must exist."""
    return typer.Option("--config", envvar=CONFIG_ENV_VAR, exists=True, dir_okay=False, readable=True,
                        help=CONFIG_HELP)


def env_var(field: str) -> str:
    """The environment variable of a settings field (`batch_size` -> `AZR_BATCH_SIZE`)."""
    return f"AZR_{field.upper()}"


def field_default(field: str, profile: str | None = None) -> object:
    """A field's default in `profile` (its profile default, else the field's own)."""
    if profile is not None and field in PROFILE_DEFAULTS.get(profile, {}):
        return PROFILE_DEFAULTS[profile][field]
    info = settings_fields()[field]
    return info.get_default(call_default_factory=True)


def default_text(field: str, profile: str | None = None) -> str:
    """What `--help` shows as the default of a settings-backed option: one value, or one per profile."""
    if profile is not None:
        return str(field_default(field, profile))
    per_profile = {name: field_default(field, name) for name in PROFILE_DEFAULTS}
    if len({repr(value) for value in per_profile.values()}) == 1:
        return str(next(iter(per_profile.values())))
    return ", ".join(f"{value} ({name})" for name, value in per_profile.items())


def setting_option(field: str, help: str, *, profile: str | None = None, **kwargs: Any) -> OptionDefault:
    """A typer option standing for the settings field `field`: `--help` shows its AZR_ variable and its default
    (in `profile`, else per profile). Its value is None unless given, so the layers beneath it decide."""
    return typer.Option(envvar=env_var(field), show_envvar=True, show_default=default_text(field, profile), help=help,
                        **kwargs)


def command_line_values(ctx: typer.Context, fields: Mapping[str, str] | None = None, /,
                        **values: Any) -> dict[str, Any]:
    """The values among `values` (by parameter name) that were typed on the command line, keyed by settings field:
    the parameter's own name, or `fields[name]` where they differ. Enum choices become their values."""
    typed = {}
    for name, value in values.items():
        source = ctx.get_parameter_source(name)
        # By name: typer may bring its own copy of click, whose ParameterSource is another enum than click's.
        if value is None or source is None or source.name != "COMMANDLINE":
            continue
        typed[(fields or {}).get(name, name)] = value.value if isinstance(value, Enum) else value
    return typed


def cli_settings(config_file: Path | None = None, *, production: bool = False, **flags: Any) -> Settings:
    """The settings of a command: `flags` over the environment over `config_file`. Exits with status 2 and the
    reason when they do not hold, or, with `production`, when the distributed profile has no API token."""
    try:
        settings = load_settings(config_file, **flags)
    except ConfigFileError as error:
        raise bad_input(str(error)) from None
    except ValidationError as error:
        raise bad_input(describe_settings_error(error, config_file, flags)) from None
    if production:
        try:
            settings.api.require_production_secrets()
        except RuntimeError as error:
            raise bad_input(str(error)) from None
    return settings


def setting_named(location: tuple[int | str, ...]) -> str:
    """The setting a validation error's location points at, by its flat name (`("rollout", "batch_size")` ->
    `batch_size`, `("inference", "sglang_urls", 0)` -> `sglang_urls`); a name outside the sections (an unknown
    one) is the location's first part."""
    for part in location:
        if isinstance(part, str) and part in FIELD_PLACES:
            return part
    return str(location[0]) if location else "settings"


def describe_settings_error(error: ValidationError, config_file: Path | None, flags: Mapping[str, object]) -> str:
    """One line per wrong value: the field, the value, where it came from and what is wrong with it."""
    file_keys: set[str] = set()
    if config_file is not None:
        try:
            file_keys = set(read_config_file(config_file, settings_fields()))
        except ConfigFileError:
            pass
    lines = ["invalid settings:"]
    for problem in error.errors():
        field = setting_named(problem["loc"])
        if field in flags and flags[field] is not None:
            origin = "the command line"
        elif env_var(field) in os.environ:
            origin = f"environment variable {env_var(field)}"
        elif field in file_keys:
            origin = f"config file {config_file}"
        else:
            origin = "the defaults"
        lines.append(f"  {field} = {problem.get('input')!r} (from {origin}): {problem['msg']}")
    return "\n".join(lines)
