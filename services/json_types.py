"""JSON at the edges: the documents read and written as JSON, and the scalars of request bodies that take what their
JSON Schema type says, and nothing pydantic's lax mode adds.

Lax `int` takes `true` and `"3"`; `StrictInt` refuses `3.0`, which JSON Schema counts as an integer. `JsonInt`
takes integers and integral numbers (`3`, `3.0`) and refuses booleans and strings, as the OpenAPI documents say.
(`StrictFloat` and `StrictBool` already match "number" and "boolean".)
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BeforeValidator, Field
from pydantic_core import PydanticCustomError


def _number_not_bool_or_text(value: object) -> object:
    if isinstance(value, bool | str | bytes):
        raise PydanticCustomError("int_type", "Input should be a valid integer")
    return value


INTEGER_NOT_BOOL_OR_TEXT = BeforeValidator(_number_not_bool_or_text)
"""The check itself, for an `Annotated[int, Field(<bounds>), INTEGER_NOT_BOOL_OR_TEXT]`: bounds written before it
reach the JSON Schema even inside a list or an optional (`Annotated[JsonInt, Field(ge=0)]` there would not)."""

JsonInt = Annotated[int, INTEGER_NOT_BOOL_OR_TEXT]
"""An integer field of a request body: a JSON integer or integral number; never a boolean or a string."""

TokenId = Annotated[int, Field(ge=0), INTEGER_NOT_BOOL_OR_TEXT]
"""A token id in a request body: a `JsonInt` of at least 0."""


JsonValue = Any
"""A value of a JSON document as `json.loads` gives it (or `json.dumps` takes it): a string, number, boolean, None, a
list or an object of such values. Kept as `Any`: the code reading one checks what it holds."""

JsonObject = dict[str, JsonValue]
"""A JSON object: a metrics line, the resolved settings, a report as saved, a request or reply body as parsed. The
edge where values are JSON; typed records (pydantic models, dataclasses) take over on either side of it."""
