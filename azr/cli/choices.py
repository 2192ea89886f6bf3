"""The fixed choices of `azr` options, as enums: typer turns each into a validated choice (a wrong value is a usage
error, status 2, listing the valid ones) and lists them in `--help`. Task types and roles are
services.algorithm.task_types' own enums."""

from __future__ import annotations

from enum import StrEnum


class ProfileChoice(StrEnum):
    """A settings profile (services/settings/)."""

    EMBEDDED = "embedded"
    DISTRIBUTED = "distributed"


class SandboxBackend(StrEnum):
    """The executor's sandbox: forked workers (bubblewrap where usable) or Docker containers."""

    PROCESS = "process"
    DOCKER = "docker"


class SeedBuffer(StrEnum):
    """Where imported seed rows go: `auto` (deduction + abduction, induction for rows with `inputs`) or one buffer."""

    AUTO = "auto"
    DEDUCTION = "deduction"
    ABDUCTION = "abduction"
    INDUCTION = "induction"


class EvalSplit(StrEnum):
    """CRUXEval splits: output (CRUXEval-O = deduction), input (CRUXEval-I = abduction), or both (O first)."""

    OUTPUT = "output"
    INPUT = "input"
    BOTH = "both"
