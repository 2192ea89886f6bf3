"""What every settings section is: a typed model of one concern's fields, each with its docstring, and the fields a
resumed run keeps.

A field's name is also its flat name: the `AZR_<NAME>` environment variable, the TOML key, the `--flag` and the key
in settings.json, whichever section holds it (services/settings/composed.py maps the flat names onto the sections).
"""

from __future__ import annotations

from typing import ClassVar

from pydantic import BaseModel, ConfigDict


class SettingsSection(BaseModel):
    """One concern's settings; `Settings` holds one of each (and the trainer's section its LoRA section)."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True, validate_default=True)

    RESUMED: ClassVar[frozenset[str]] = frozenset()
    """The fields `azr run --resume DIR` takes from DIR/settings.json unless given again as flags: what fixes the
    run's sizes, its algorithm and an update's numbers (precision and split), so that the updates a resumed run makes
    again from the store equal the lost ones bit for bit (on the same CPU, with the same thread count)."""

    MIRRORED: ClassVar[dict[str, str]] = {}
    """Fields that copy another section's field of the same name (field -> that section): `Settings` fills them, so
    a component takes one section; they are not settings of their own (no flat name, not in settings.json)."""

    @classmethod
    def own_fields(cls) -> list[str]:
        """The section's settings, nested sections and mirrors left out."""
        return [name for name, info in cls.model_fields.items()
                if name not in cls.MIRRORED and nested_section(info.annotation) is None]


def nested_section(annotation: object) -> type[SettingsSection] | None:
    """The section type of a field that holds one (the trainer's `lora`), else None."""
    if isinstance(annotation, type) and issubclass(annotation, SettingsSection):
        return annotation
    return None
