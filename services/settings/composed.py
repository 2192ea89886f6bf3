"""`Settings`: the sections of one AZR deployment or run, read from flat names.

Two profiles share one code path (docs/design.md §4):
- `embedded`: one process, SQLite file, in-process queue, process sandbox, local CPU model. Sizes shrink
  (e.g. B = 2, short responses); the algorithm does not.
- `distributed`: Redis, PostgreSQL, SGLang servers, Docker sandbox. The paper's constants (Table 3) are its defaults.

Layers, highest first: a command-line flag (keyword), an `AZR_<FIELD>` environment variable, a TOML config file
(`--config FILE` or `AZR_CONFIG`; services/settings/config_file.py), the profile's default, the field's default. A
field set in any of the first three always wins over the profile's default.

Every layer speaks flat names (`batch_size`, `AZR_BATCH_SIZE`, `--batch-size`, `batch_size = 2`, settings.json's
`"batch_size"`): a name is the field's own, whichever section holds it, so a user's config file, environment and
saved runs read as they always did. `FIELD_PLACES` says where each lives; the layers are read against a flat model
of every field (`FLAT_SOURCES`: the environment's JSON lists, the secret files) and the values then go to their
sections. A wrong value's error names the section and the field (`rollout.batch_size`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from copy import copy
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, Field, create_model, model_validator
from pydantic.fields import FieldInfo
from pydantic_settings import (
    BaseSettings,
    DotEnvSettingsSource,
    EnvSettingsSource,
    PydanticBaseSettingsSource,
    SecretsSettingsSource,
    SettingsConfigDict,
)

from services.json_types import JsonObject
from services.settings.api import ApiSettings
from services.settings.executor import ExecutorSettings
from services.settings.inference import InferenceSettings
from services.settings.observability import ObservabilitySettings
from services.settings.profiles import PROFILE_DEFAULTS
from services.settings.rollout import RolloutSettings
from services.settings.run import RunSettings
from services.settings.section import SettingsSection, nested_section
from services.settings.storage import StorageSettings
from services.settings.trainer import TrainerSettings
from services.settings.urls import mask_url_password

SECTIONS: dict[str, type[SettingsSection]] = {
    "run": RunSettings, "storage": StorageSettings, "api": ApiSettings, "inference": InferenceSettings,
    "executor": ExecutorSettings, "rollout": RolloutSettings, "trainer": TrainerSettings,
    "observability": ObservabilitySettings,
}
"""The sections of `Settings`, by attribute name."""

SECRET_FIELDS = ("api_token", "sglang_admin_api_key", "database_password", "redis_password")
"""The secrets among the settings: masked in what is saved or printed unless asked otherwise."""


@dataclass(frozen=True)
class FieldPlace:
    """Where one flat setting lives: the path of sections down to it (`("trainer", "lora")`) and its field."""

    path: tuple[str, ...]
    info: FieldInfo


def _places(section: type[SettingsSection], path: tuple[str, ...]) -> dict[str, FieldPlace]:
    places = {name: FieldPlace(path, section.model_fields[name]) for name in section.own_fields()}
    for name, info in section.model_fields.items():
        nested = nested_section(info.annotation)
        if nested is not None:
            places.update(_places(nested, (*path, name)))
    return places


FIELD_PLACES: dict[str, FieldPlace] = {name: place for section, cls in SECTIONS.items()
                                       for name, place in _places(cls, (section,)).items()}
"""Every setting by its flat name."""


def settings_fields() -> dict[str, FieldInfo]:
    """Every setting by its flat name, with its type, default, bounds and docstring (`description`)."""
    return {name: place.info for name, place in FIELD_PLACES.items()}


def resumed_fields() -> frozenset[str]:
    """The settings a resumed run takes from its settings.json: what each section declares (`RESUMED`)."""
    def declared(section: type[SettingsSection]) -> set[str]:
        names = set(section.RESUMED)
        for info in section.model_fields.values():
            nested = nested_section(info.annotation)
            if nested is not None:
                names |= declared(nested)
        return names

    return frozenset(name for cls in SECTIONS.values() for name in declared(cls))


class _FlatBase(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="AZR_", extra="ignore")


FLAT_SOURCES: type[BaseSettings] = create_model(  # type: ignore[call-overload]
    "FlatSettings", __base__=_FlatBase,
    **{name: (place.info.annotation, copy(place.info)) for name, place in FIELD_PLACES.items()})
"""Every setting as one flat model, only for reading the layers (never validated as such): pydantic-settings'
environment and secret-file sources find `AZR_<NAME>` / `azr_<name>` and decode JSON lists by the field's type."""


def _as_values(value: object) -> object:
    return value.model_dump() if isinstance(value, BaseModel) else value


def _put(sections: dict[str, object], path: tuple[str, ...], name: str, value: object, *, default: bool) -> None:
    """Set `name` in the section at `path` (`default`: only where nothing set it)."""
    target = sections
    for part in path:
        current = _as_values(target.get(part))
        if current is not None and not isinstance(current, Mapping):
            return  # not a section's values: validation refuses it as it stands
        nested: dict[str, object] = dict(current or {})
        target[part] = nested
        target = nested
    if default:
        target.setdefault(name, value)
    else:
        target[name] = value


def into_sections(data: Mapping[str, object]) -> dict[str, object]:
    """Flat settings (and sections given whole) as one dict per section; the profile's defaults fill what nothing
    set. A name that is neither a setting nor a section stays where it is (validation refuses it, naming it)."""
    grouped: dict[str, object] = {key: value for key, value in data.items() if key not in FIELD_PLACES}
    sections: dict[str, object] = {name: grouped.pop(name) for name in SECTIONS if name in grouped}
    for key, value in data.items():
        if key in FIELD_PLACES:
            _put(sections, FIELD_PLACES[key].path, key, value, default=False)
    run = _as_values(sections.get("run")) or {}
    profile = data.get("profile", run.get("profile", "embedded") if isinstance(run, dict) else "embedded")
    for key, value in PROFILE_DEFAULTS.get(str(profile), {}).items():
        _put(sections, FIELD_PLACES[key].path, key, value, default=True)
    return {**grouped, **{name: sections.get(name, {}) for name in SECTIONS}}


class Settings(BaseSettings):
    """Resolved configuration of one AZR deployment or run, one section per concern; each component takes its own
    (`PolicyTrainer(model, settings.trainer)`), the composition root (`azr.factory`) reads across them."""

    model_config = SettingsConfigDict(env_prefix="AZR_", extra="forbid", validate_default=True)

    run: RunSettings = Field(default_factory=RunSettings)
    """The run: name, directory, profile, seed, steps, device and CPU threads."""
    storage: StorageSettings = Field(default_factory=StorageSettings)
    """Buffer database, Redis, episode channels."""
    api: ApiSettings = Field(default_factory=ApiSettings)
    """The HTTP services and the coordinator as their client."""
    inference: InferenceSettings = Field(default_factory=InferenceSettings)
    """The engine that generates and the model it serves."""
    executor: ExecutorSettings = Field(default_factory=ExecutorSettings)
    """The sandbox of model-written code."""
    rollout: RolloutSettings = Field(default_factory=RolloutSettings)
    """Self-play: sizes, sampling, rewards, seeding, staleness."""
    trainer: TrainerSettings = Field(default_factory=TrainerSettings)
    """The update: objective, AdamW, memory, precision, checkpoints, LoRA."""
    observability: ObservabilitySettings = Field(default_factory=ObservabilitySettings)
    """Metrics endpoints, evaluation, TensorBoard and W&B."""

    @classmethod
    def settings_customise_sources(cls, settings_cls: type[BaseSettings], init_settings: PydanticBaseSettingsSource,
                                   env_settings: PydanticBaseSettingsSource,
                                   dotenv_settings: PydanticBaseSettingsSource,
                                   file_secret_settings: PydanticBaseSettingsSource,
                                   ) -> tuple[PydanticBaseSettingsSource, ...]:
        """Keywords (flags) > AZR_* environment > the TOML config file in effect > secret files, all by flat name;
        profile defaults fill the rest."""
        from services.settings.config_file import ConfigFileSource

        secrets_dir = file_secret_settings.secrets_dir if isinstance(file_secret_settings,
                                                                     SecretsSettingsSource) else None
        return (init_settings, EnvSettingsSource(FLAT_SOURCES), DotEnvSettingsSource(FLAT_SOURCES),
                ConfigFileSource(FLAT_SOURCES), SecretsSettingsSource(FLAT_SOURCES, secrets_dir=secrets_dir))

    @model_validator(mode="before")
    @classmethod
    def _flat_names_into_sections(cls, data: object) -> object:
        return into_sections(data) if isinstance(data, Mapping) else data

    @model_validator(mode="after")
    def _mirrors_filled(self) -> Settings:
        return self._fill_mirrors()

    def _fill_mirrors(self) -> Settings:
        """Each section's copies of other sections' fields (`MIRRORED`) take their values."""
        for name in SECTIONS:
            section = getattr(self, name)
            if section.MIRRORED:
                setattr(self, name, section.model_copy(update={
                    field: getattr(getattr(self, source), field) for field, source in section.MIRRORED.items()}))
        return self

    def value(self, name: str) -> object:
        """The setting of flat name `name` (`batch_size`), from its section."""
        target: object = self
        for part in FIELD_PLACES[name].path:
            target = getattr(target, part)
        return getattr(target, name)

    def with_values(self, **values: object) -> Settings:
        """A copy with these settings (flat names) replaced in their sections, unvalidated like `model_copy`; the
        sections' copies of them follow."""
        updates: dict[tuple[str, ...], dict[str, object]] = {}
        for name, value in values.items():
            if name not in FIELD_PLACES:
                raise KeyError(f"no setting named {name!r}")
            updates.setdefault(FIELD_PLACES[name].path, {})[name] = value
        copied = _copied(self, updates)
        assert isinstance(copied, Settings)
        return copied._fill_mirrors()

    def model_copy(self, *, update: Mapping[str, object] | None = None, deep: bool = False) -> Settings:
        """pydantic's copy, whose `update` names sections (`{"rollout": ...}`). A flat name is refused, not stored
        beside the sections where no component would read it: `with_values(batch_size=2)` replaces a setting."""
        unknown = sorted(set(update or {}) - set(SECTIONS))
        if unknown:
            raise TypeError(f"Settings.model_copy updates sections, not settings {unknown}: use with_values(...)")
        return super().model_copy(update=update, deep=deep)

    def resolved(self, mask_secrets: bool = True) -> JsonObject:
        """All settings by flat name as JSON-ready values (the layout of settings.json and `azr config show`);
        secrets masked unless asked otherwise."""
        dumps = {name: getattr(self, name).model_dump(mode="json") for name in SECTIONS}
        values: JsonObject = {}
        for name, place in FIELD_PLACES.items():
            found = dumps[place.path[0]]
            for part in place.path[1:]:
                found = found[part]
            values[name] = found[name]
        if mask_secrets:
            values["api_token"] = ("<placeholder: set AZR_API_TOKEN>" if self.api.uses_default_secret()
                                   else "********")
            for key in values:  # every URL field: credentials may sit in any of them (issue 37: sglang_urls)
                if key.endswith("_url") and isinstance(values[key], str):
                    values[key] = mask_url_password(values[key])
                elif key.endswith("_urls") and isinstance(values[key], list):
                    values[key] = [mask_url_password(str(url)) for url in values[key]]
        else:
            for key in SECRET_FIELDS:
                secret = self.value(key)
                if secret is not None:
                    values[key] = secret.get_secret_value()  # type: ignore[attr-defined]
        return values

    def save_resolved(self, directory: Path | None = None) -> Path:
        """Write the resolved settings (secrets masked) to `settings.json` in the run directory."""
        target_dir = directory or self.run.run_dir
        target_dir.mkdir(parents=True, exist_ok=True)
        path = target_dir / "settings.json"
        path.write_text(json.dumps(self.resolved(), indent=2, sort_keys=True) + "\n")
        return path


def _copied(model: BaseModel, updates: Mapping[tuple[str, ...], Mapping[str, object]]) -> BaseModel:
    """`model` with `updates[()]` set on it and `updates[(part, *rest)]` set in its section `part`, unvalidated."""
    update: dict[str, object] = dict(updates.get((), {}))
    for part in {path[0] for path in updates if path}:
        update[part] = _copied(getattr(model, part), {path[1:]: values for path, values in updates.items()
                                                       if path and path[0] == part})
    return model.model_copy(update=update)
