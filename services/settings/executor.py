"""The sandbox that runs model-written code: its backend, isolation, limits and pool."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field

from services.settings.profiles import default_executor_python
from services.settings.section import SettingsSection


class ExecutorSettings(SettingsSection):
    """The executor's backend and isolation, one program run's limits, the worker pool and the RQ queue."""

    RESUMED: ClassVar[frozenset[str]] = frozenset({"executor_workers", "executor_timeout_s"})

    executor_backend: Literal["process", "docker"] = "process"
    """Sandbox: forked workers (bubblewrap where available) or hardened long-lived Docker containers."""
    executor_workers: int = Field(2, ge=1)
    """Long-lived sandbox workers per executor process."""
    executor_timeout_s: float = Field(10.0, gt=0)
    """Wall-clock limit per program run (paper: 10 s)."""
    executor_memory_mb: int = Field(1024, ge=64)
    """Address-space limit per program run, MiB."""
    executor_max_output_bytes: int = Field(65_536, gt=0)
    """Largest repr of a program's result; longer is `output_too_large` (the authors truncate at 400 chars)."""
    executor_max_processes: int = Field(64, ge=1)
    """Process/thread cap for one task (Docker pids-limit; RLIMIT_NPROC in the process sandbox)."""
    executor_sandbox: Literal["auto", "bwrap", "rootless", "none"] = "auto"
    """Process backend isolation: `auto` (bubblewrap, else the rootless namespace sandbox, else refuse to start and
    name the install command), `bwrap` or `rootless` (that one, required), `none` (rlimits only: model code runs
    unconfined; every log line and /readyz say so). Source: issue 37, docs/isolation.md."""
    executor_python: str = Field(default_factory=default_executor_python)
    """Absolute interpreter path for sandbox workers (never the PATH shim; the worker is stdlib-only)."""
    executor_recycle_after: int = Field(1000, ge=1)
    """Replace a worker after this many tasks (a crash replaces it at once)."""
    executor_queue: str = Field("executor", pattern=r"^[A-Za-z0-9_.:-]{1,128}$")
    """RQ queue executor jobs travel on (distributed profile); `azr worker executor` serves it by default."""
    executor_docker_image: str = "azr-executor:1"
    """Image the Docker backend runs its workers in (build offline with executor_svc/image/build_offline.sh)."""
