"""Reading JSONL input files row by row without stopping at a bad line (`azr validate`, `azr seeds import`)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

from services.json_types import JsonObject


def read_jsonl_rows(path: Path) -> Iterator[tuple[int, JsonObject | None, str | None]]:
    """(line number, row or None, problem or None) for every non-blank line; a line that is not a JSON object
    yields its problem instead of a row, and reading goes on."""
    with path.open() as lines:
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as error:
                yield number, None, f"line {number}: not JSON: {error.msg}"
                continue
            yield (number, row, None) if isinstance(row, dict) else (number, None, f"line {number}: not an object")
