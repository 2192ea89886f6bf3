"""Scalars of request bodies that take what their JSON Schema type says, and nothing pydantic's lax mode adds.

Lax `int` takes `true` and `"3"`; `StrictInt` refuses `3.0`, which JSON Schema counts as an integer. `JsonInt`
takes integers and integral numbers (`3`, `3.0`) and refuses booleans and strings, as the OpenAPI documents say.
(`StrictFloat` and `StrictBool` already match "number" and "boolean".)
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BeforeValidator, Field
from pydantic_core import PydanticCustomError


def _number_not_bool_or_text(value: Any) -> Any:
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
