"""A TOML settings file: one layer of the settings, beneath the environment and above the profile defaults.

Precedence, highest first: command-line flag > `AZR_*` environment variable > config file > profile default
(`PROFILE_DEFAULTS`) > field default. The file in effect is the one passed as `--config FILE` (`load_settings`
sets it around the construction), else the one `AZR_CONFIG` names, else none.

The file is flat: its top-level keys are Settings field names, values in TOML types (`batch_size = 8`,
`sglang_urls = ["http://a:30000"]`, `seed_files = ["seeds.jsonl"]`). Relative paths in it are relative to the
working directory, as in the environment. The file may set `profile`; that profile's defaults then fill what
nothing else sets. Examples: `configs/embedded.toml`, `configs/distributed.toml`; the exact presets
`configs/paper.toml` and `configs/authors-code.toml` end each line with a comment citing the value's source
(`config_file_comments`; docs/paper-vs-code.md).

An unreadable file, a file that is not TOML, a table, or a key that is not a setting is a ConfigFileError naming the
file (and the key); a value of the wrong type is pydantic's ValidationError naming the field.
"""

from __future__ import annotations

import difflib
import os
import tomllib
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path

from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource

CONFIG_ENV_VAR = "AZR_CONFIG"
"""Environment variable naming the config file when no `--config` is given."""

_config_file: ContextVar[Path | None] = ContextVar("azr_config_file", default=None)
"""The file `load_settings` was given, while it builds the settings."""


class ConfigFileError(ValueError):
    """The config file cannot be used: missing, unreadable, not TOML, or with a key that is not a setting."""


def config_file_in_effect() -> Path | None:
    """The config file the next Settings() reads: `--config`'s while `using_config_file` holds it, else AZR_CONFIG's."""
    given = _config_file.get()
    if given is not None:
        return given
    named = os.environ.get(CONFIG_ENV_VAR, "").strip()
    return Path(named) if named else None


@contextmanager
def using_config_file(path: Path | None) -> Iterator[None]:
    """Make `path` the config file of the Settings built inside the block (None: AZR_CONFIG's, if any)."""
    token = _config_file.set(path)
    try:
        yield
    finally:
        _config_file.reset(token)


def read_config_file(path: Path, known_fields: Iterable[str]) -> dict[str, object]:
    """The settings `path` sets, checked against `known_fields` (ConfigFileError naming the file and the key)."""
    try:
        with path.open("rb") as stream:
            values = tomllib.load(stream)
    except FileNotFoundError:
        raise ConfigFileError(f"config file {path} does not exist") from None
    except OSError as error:
        raise ConfigFileError(f"config file {path} cannot be read: {error.strerror or error}") from None
    except tomllib.TOMLDecodeError as error:
        raise ConfigFileError(f"config file {path} is not valid TOML: {error}") from None
    known = list(known_fields)
    for key, value in values.items():
        if isinstance(value, dict):
            raise ConfigFileError(f"config file {path}: {key!r} is a table; the file is flat (`setting = value` at "
                                  f"the top level)")
        if key not in known:
            close = difflib.get_close_matches(key, known, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise ConfigFileError(f"config file {path}: unknown setting {key!r}{hint}; keys are Settings field names, "
                                  f"as `azr config show` prints them")
    return values


def config_file_comments(path: Path) -> dict[str, str]:
    """The comment at the end of each top-level `key = value` line of the file (where a preset cites the source of
    its value), by key; keys without one are left out. A `#` inside a string value is not a comment: the line is cut
    at the first `#` before which it parses as TOML."""
    comments: dict[str, str] = {}
    for line in path.read_text().splitlines():
        key = line.split("=", 1)[0].strip()
        if "=" not in line or not key.isidentifier():
            continue
        for cut in (index for index, char in enumerate(line) if char == "#"):
            try:
                parsed = tomllib.loads(line[:cut])
            except tomllib.TOMLDecodeError:
                continue
            if key in parsed and line[cut + 1:].strip():
                comments[key] = line[cut + 1:].strip()
            break
    return comments


class ConfigFileSource(PydanticBaseSettingsSource):
    """pydantic-settings source of the config file in effect (see `config_file_in_effect`); empty without one."""

    def __init__(self, settings_cls: type[BaseSettings]) -> None:
        super().__init__(settings_cls)
        path = config_file_in_effect()
        self.path = path
        self.values = read_config_file(path, settings_cls.model_fields) if path is not None else {}

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[object, str, bool]:
        """The file's value for `field_name` (None when the file does not set it)."""
        return self.values.get(field_name), field_name, False

    def __call__(self) -> dict[str, object]:
        return dict(self.values)
