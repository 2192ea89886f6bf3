"""Reading a collapse from a response: the prompt's own example as the answer, the think block's length, and what
a proposal holds outside its answer tag."""

from __future__ import annotations

import pytest

from services.algorithm.collapse_signals import (
    PROMPT_EXAMPLES,
    answer_text,
    copies_prompt_example,
    proposal_shape,
    think_chars,
)
from services.algorithm.prompt_texts import (
    ABDUCTION_SOLVER_TEMPLATE,
    DEDUCTION_SOLVER_TEMPLATE,
    INDUCTION_SOLVER_TEMPLATE,
)
from services.algorithm.task_types import Role, TaskType


def test_each_solver_example_is_the_one_its_prompt_shows() -> None:
    """The constants must follow the prompt texts (doubled braces are the templates' format escapes)."""
    for task_type, template in ((TaskType.DEDUCTION, DEDUCTION_SOLVER_TEMPLATE),
                                (TaskType.ABDUCTION, ABDUCTION_SOLVER_TEMPLATE),
                                (TaskType.INDUCTION, INDUCTION_SOLVER_TEMPLATE)):
        shown = template.replace("{{", "{").replace("}}", "}")
        assert PROMPT_EXAMPLES[(task_type, Role.SOLVE)] in shown


@pytest.mark.parametrize(("task_type", "response", "copied"), [
    (TaskType.DEDUCTION, " I think.</think> <answer>```output\n{'age': 20,  'city': 'New York'}\n```</answer>", True),
    (TaskType.DEDUCTION, " I think.</think> <answer>```output\n{'age': 21, 'city': 'New York'}\n```</answer>", False),
    (TaskType.ABDUCTION, "x</think> <answer>```input\n'John', {'age': 20, 'city': 'New York'}\n```</answer>", True),
    (TaskType.INDUCTION, "x</think> <answer>```python\ndef f(a):\n    return a\n```</answer>", True),
    (TaskType.INDUCTION, "x</think> <answer>```python\ndef f(a):\n    return a + 1\n```</answer>", False),
    # the example without its fence (the run's step-17 induction answers): no extractable program, still a copy
    (TaskType.INDUCTION, " I take an input and return it.</think>\n<answer>def f(a): return a</answer>", True),
    (TaskType.INDUCTION, "x</think> <answer> def f(a): return a + 1 </answer>", False),
    # ...or inside a tag of its own (one of the run's step-18 answers)
    (TaskType.INDUCTION, "It stays.</think><answer> <python> def f(a): return a </python> </answer>", True),
    (TaskType.INDUCTION, "x</think><answer> <python> def f(a): return a < 2 </python> </answer>", False),
    (TaskType.DEDUCTION, "x</think> <answer>no idea</answer>", False),
])
def test_a_solver_answer_equal_to_the_example_is_a_copy(task_type: TaskType, response: str, copied: bool) -> None:
    assert copies_prompt_example(task_type, Role.SOLVE, response) is copied


def test_a_proposal_whose_input_is_the_example_is_a_copy() -> None:
    response = ("plan</think> <answer>```python\ndef f(name, info):\n    return name\n```\n"
                "```input\n'John', {'age': 20, 'city': 'New York'}\n```</answer>")
    assert copies_prompt_example(TaskType.DEDUCTION, Role.PROPOSE, response)
    assert answer_text(TaskType.DEDUCTION, Role.PROPOSE, response) == "'John', {'age': 20, 'city': 'New York'}"
    other = response.replace("'John'", "'Mary'")
    assert not copies_prompt_example(TaskType.DEDUCTION, Role.PROPOSE, other)
    example = "```input\n'John', {'age': 20, 'city': 'New York'}\n```"
    inputs = "".join(f"```input\n{i}\n```\n" for i in range(9)) + example
    induction = f"plan</think> <answer>{inputs}\n```message\nadd\n```</answer>"
    assert copies_prompt_example(TaskType.INDUCTION, Role.PROPOSE, induction)


def test_think_length_counts_the_block_only() -> None:
    assert think_chars("  abc  </think> <answer>1</answer>") == 3
    assert think_chars("never closed <answer>1</answer>") == 0


def test_a_program_outside_the_answer_tag_still_counts_as_written() -> None:
    """The commonest 1.5B failure: a fenced program and input after </think> with no <answer> tag."""
    shape = proposal_shape("plan</think>\n```python\ndef f(x):\n    return x\n```\n```input\n3\n```")
    assert shape.has_program and shape.has_input
    assert not proposal_shape("plan</think> <answer>just words</answer>").has_program
    assert not proposal_shape("```python\nprint(1)\n```").has_program  # a block with no def, class or import
