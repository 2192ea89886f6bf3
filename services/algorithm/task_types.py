"""Task types, roles and the six (task type x role) groups of Absolute Zero (paper §3.2; docs/design.md §1)."""

from __future__ import annotations

from enum import StrEnum


class TaskType(StrEnum):
    """The three reasoning modes built from a triplet (program p, input i, output o)."""

    DEDUCTION = "deduction"  # given p, i -> predict o
    ABDUCTION = "abduction"  # given p, o -> find some i with p(i) == o
    INDUCTION = "induction"  # given (i, o) pairs + message -> write p


class Role(StrEnum):
    """The two roles one policy plays."""

    PROPOSE = "propose"
    SOLVE = "solve"


TASK_GROUPS: tuple[tuple[TaskType, Role], ...] = tuple(
    (task_type, role) for task_type in TaskType for role in Role
)
"""The six groups that get independent TRR++ baselines (Eq 8), in a fixed order."""

ENTRY_FUNCTION = "f"
"""Every program's entry function is named `f` (Figs 34-36)."""

FORBIDDEN_MODULES: tuple[str, ...] = (
    "logging",
    "random",
    "multiprocessing",
    "pebble",
    "subprocess",
    "threading",
    "datetime",
    "time",
    "hashlib",
    "calendar",
    "bcrypt",
    "os.sys",
    "os.path",
    "sys.exit",
    "os.environ",
)
"""Fig 8: modules and dotted names forbidden in proposed programs, in the paper's order."""

ZERO_TRIPLET_PROGRAM = "def f(x):\n    return x"
"""Fig 5: the identity program that seeds D_abd and D_ded."""

ZERO_TRIPLET_INPUT = "'Hello World'"
"""Fig 5: the zero triplet's input, as argument source text."""

ZERO_TRIPLET_OUTPUT = "'Hello World'"
"""Fig 5: the zero triplet's output, repr of f(input)."""
