"""Explain how a response is read (`azr parse`): one JSON-ready row per response. Pure.

The answer to "why did my model get −1 here?": the format verdict and its reason, what was extracted (or why
nothing was), and the reward when the text alone decides it (services/algorithm/objectives.reward_from_text).
"""

from __future__ import annotations

import dataclasses

from services.algorithm.objectives import reward_from_text
from services.algorithm.parsing import Reading
from services.algorithm.task_types import Role, TaskType
from services.json_types import JsonObject

KINDS: tuple[str, ...] = tuple(f"{role.value}_{task_type.value}" for role in Role for task_type in TaskType)
"""Row kinds: `propose_deduction`, ..., `solve_induction` (role first, as the corpus files write them)."""


def parse_kind(kind: str) -> tuple[TaskType, Role]:
    """`propose_deduction` -> (deduction, propose); ValueError naming the valid kinds otherwise."""
    role, _, task_type = kind.partition("_")
    try:
        return TaskType(task_type), Role(role)
    except ValueError:
        raise ValueError(f"unknown kind {kind!r}: expected one of {', '.join(KINDS)}") from None


def reading_row(reading: Reading) -> JsonObject:
    """The row `azr parse` writes for one reading."""
    extracted = dataclasses.asdict(reading.extracted) if reading.extracted is not None else None
    if extracted is not None:
        extracted.pop("task_type", None)
        if "inputs" in extracted:
            extracted["inputs"] = list(extracted["inputs"])
    failure = reading.failure
    return {
        "kind": f"{reading.role.value}_{reading.task_type.value}",
        "format_ok": reading.format_ok,
        "extractable": reading.extracted is not None,
        "failure": failure.value if failure else None,
        "format_failure": reading.generation.format_failure.value if reading.generation.format_failure else None,
        "extraction_failure": reading.extraction_failure.reason.value if reading.extraction_failure else None,
        "extraction_detail": reading.extraction_failure.detail if reading.extraction_failure else None,
        "reward": reward_from_text(format_ok=reading.format_ok, extracted=reading.extracted is not None),
        "answer": reading.generation.answer if reading.generation.has_answer else None,
        "extracted": extracted,
    }
