"""Reading a CRUXEval-format JSONL file: one `{"code", "input", "output", "id"}` object a line.

Unlike `azr validate` (which reports bad lines and goes on), an evaluation refuses a file with any bad row: a
benchmark score over a silently shortened file would not be comparable with another one. The first problem is
raised as EvalDataError naming the file and the line.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from services.algorithm.program_identity import normalise_program
from services.evaluation.cruxeval import CruxRow, EvalDataError, row_from_object
from services.jsonl_rows import read_jsonl_rows


def load_rows(path: Path, limit: int = 0) -> list[CruxRow]:
    """The first `limit` rows of the file (all when 0), in file order, so every evaluation sees the same rows.

    Every line of the file is checked, also those beyond `limit`, so a file is either usable or refused whatever
    the limit. Raises EvalDataError for a missing or empty file, a line that is not a JSON object, a row without
    non-empty string `code`/`input`/`output`, or a repeated id.
    """
    if limit < 0:
        raise EvalDataError(f"limit must be 0 (all rows) or positive, got {limit}")
    if not path.is_file():
        raise EvalDataError(f"{path}: no such file")
    rows: list[CruxRow] = []
    first_line: dict[str, int] = {}
    try:
        for number, obj, problem in read_jsonl_rows(path):
            if obj is None:
                raise EvalDataError(f"{path}: {problem}")
            row = row_from_object(number, obj, str(path))
            if row.id in first_line:
                raise EvalDataError(f"{path}: line {number}: id {row.id!r} already used on line {first_line[row.id]}")
            first_line[row.id] = number
            rows.append(row)
    except UnicodeDecodeError as error:
        raise EvalDataError(f"{path}: not UTF-8 text ({error.reason})") from None
    if not rows:
        raise EvalDataError(f"{path}: no rows")
    return rows[:limit] if limit else rows


def seed_programs(paths: Iterable[Path]) -> set[str]:
    """The normalised programs of seed files (the authors' format: `snippet`; `azr validate` rows: `program`), so
    a held-out probe can leave out every row whose program the run was seeded with. EvalDataError for a missing or
    unreadable file; rows without a program are ignored."""
    programs: set[str] = set()
    for path in paths:
        if not path.is_file():
            raise EvalDataError(f"{path}: no such file")
        for _, obj, _problem in read_jsonl_rows(path):
            program = (obj or {}).get("snippet") or (obj or {}).get("program")
            if isinstance(program, str):
                programs.add(normalise_program(program))
    return programs


def held_out(rows: list[CruxRow], excluded_programs: set[str]) -> list[CruxRow]:
    """The rows whose normalised program is not in `excluded_programs`, in file order."""
    return [row for row in rows if normalise_program(row.code) not in excluded_programs]
