"""What the prompts (services/algorithm/prompts.py) read of a task: structural views, so prompts need no records.

`services.records.Triplet` and `services.algorithm.prompts.ReferenceTriplet` satisfy ReferenceSnippet;
`services.records.InductionTask` satisfies InductionPuzzle. Both are runtime-checkable: `solver_prompt` dispatches
on them. They live beside the prompts that read them, in the algorithm layer, so the algorithm imports no port.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable


@runtime_checkable
class ReferenceSnippet(Protocol):
    """A (program, input, output) triplet as prompts show it. `services.records.Triplet` satisfies it."""

    @property
    def program(self) -> str: ...

    @property
    def input(self) -> str: ...

    @property
    def output(self) -> str: ...


@runtime_checkable
class InductionPuzzle(Protocol):
    """What the induction solver is shown. `services.records.InductionTask` satisfies it (its split is N//2)."""

    @property
    def given_pairs(self) -> list[tuple[str, str]]: ...

    @property
    def message(self) -> str: ...
