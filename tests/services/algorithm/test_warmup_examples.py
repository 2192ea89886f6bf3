"""The format warm-up's examples: every response reads as a well-formed, extractable proposal of its seed triplet,
whose own triplet is never among the references it is shown."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from services.algorithm.parsing import read_response
from services.algorithm.seed_programs import strip_seed_program
from services.algorithm.task_types import Role, TaskType
from services.algorithm.warmup_examples import warmup_examples
from services.settings.profiles import PACKAGED_SEED_FILES

IO_ROWS = [json.loads(line) for line in Path(PACKAGED_SEED_FILES[0]).read_text().splitlines() if line.strip()]
F_ROWS = [json.loads(line) for line in Path(PACKAGED_SEED_FILES[1]).read_text().splitlines() if line.strip()]


def examples(per_type: int = 5, fits=lambda text: True, seed: int = 0):
    return warmup_examples(IO_ROWS, F_ROWS, per_type=per_type, references_k=6, num_inputs=10, fits=fits,
                           rng=random.Random(seed))


def test_each_response_is_a_well_formed_proposal_of_its_seed() -> None:
    made = examples()
    assert [e.task_type for e in made[:3]] == [TaskType.DEDUCTION, TaskType.ABDUCTION, TaskType.INDUCTION]
    assert {t: sum(e.task_type is t for e in made) for t in TaskType} == {t: 5 for t in TaskType}
    for example in made:
        reading = read_response(example.task_type, Role.PROPOSE, "<think>" + example.response)
        assert reading.format_ok, example.response
        if example.task_type is TaskType.INDUCTION:
            assert len(reading.extracted.inputs) == 10 and reading.extracted.message == F_ROWS[example.seed_index][
                "message"]
        else:
            assert reading.extracted.input == IO_ROWS[example.seed_index]["input"]
            assert reading.extracted.program.startswith("def f(") or "def f(" in reading.extracted.program


def test_the_target_triplet_is_never_a_reference_and_the_identity_seed_never_a_target() -> None:
    for example in examples(per_type=20, seed=3):
        assert example.seed_index != 0
        if example.task_type is not TaskType.INDUCTION:
            assert example.instruction.count("</snippet_") == 6  # K references shown
            target = IO_ROWS[example.seed_index]
            program = strip_seed_program(target["snippet"])
            assert f"```python\n{program}\n```" not in example.instruction
            assert f"```python\n{program}\n```" in example.response


def test_prompts_over_the_budget_are_redrawn_or_left_out() -> None:
    made = examples(per_type=4, fits=lambda text: len(text) < 6_500)
    assert all(len(e.instruction) < 6_500 for e in made)
    with pytest.raises(ValueError, match="at least 8 seed triplets"):
        warmup_examples(IO_ROWS[:5], F_ROWS, per_type=1, references_k=6, num_inputs=10, fits=lambda _: True,
                        rng=random.Random(0))
