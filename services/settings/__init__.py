"""The settings of every service and command, one typed section per concern, read from flat names (environment
prefix `AZR_`): `Settings` (services/settings/composed.py) holds `run`, `storage`, `api`, `inference`, `executor`,
`rollout`, `trainer` (with `lora`) and `observability`; each component takes its own section. `load_settings` reads
them as a command does (config file, environment, flags, secret files); `PROFILE_DEFAULTS` are each profile's
defaults; every section declares what a resumed run keeps (`RESUMED`, gathered by `resumed_fields`)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from services.settings.api import DEFAULT_API_TOKEN, ApiSettings
from services.settings.composed import (
    FIELD_PLACES,
    SECTIONS,
    Settings,
    resumed_fields,
    settings_fields,
)
from services.settings.executor import ExecutorSettings
from services.settings.inference import InferenceSettings
from services.settings.observability import ObservabilitySettings
from services.settings.profiles import PROFILE_DEFAULTS
from services.settings.rollout import RolloutSettings
from services.settings.run import Profile, RunSettings
from services.settings.section import SettingsSection
from services.settings.storage import StorageSettings
from services.settings.trainer import LoraSettings, TrainerSettings
from services.settings.urls import mask_url_password, url_with_password

SECRETS_DIR = "/run/secrets"
"""Where Compose and Kubernetes mount secret files; each file named after a setting's variable in lower case
(`azr_api_token`, `azr_redis_password`) is that setting's value, below every other layer. AZR_SECRETS_DIR moves it."""


def load_settings(config_file: Path | None = None, **overrides: Any) -> Settings:
    """Settings from `config_file` (else AZR_CONFIG's file, if any), the environment (`AZR_*`) over it, and explicit
    overrides (flags, by flat name; None = not given) on top; secret files (SECRETS_DIR) where that directory exists.
    ConfigFileError or pydantic's ValidationError when they do not hold."""
    from services.settings.config_file import using_config_file

    directory = os.environ.get("AZR_SECRETS_DIR", SECRETS_DIR)
    secrets: dict[str, Any] = {"_secrets_dir": directory} if os.path.isdir(directory) else {}
    with using_config_file(config_file):
        return Settings(**secrets, **{k: v for k, v in overrides.items() if v is not None})


__all__ = ["DEFAULT_API_TOKEN", "FIELD_PLACES", "PROFILE_DEFAULTS", "SECRETS_DIR", "SECTIONS", "ApiSettings",
           "ExecutorSettings", "InferenceSettings", "LoraSettings", "ObservabilitySettings", "Profile",
           "RolloutSettings", "RunSettings", "Settings", "SettingsSection", "StorageSettings", "TrainerSettings",
           "load_settings", "mask_url_password", "resumed_fields", "settings_fields", "url_with_password"]
