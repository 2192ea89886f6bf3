"""The run: its name and directory, its profile, its seed and length, and where this process computes."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar, Literal

from pydantic import Field

from services.settings.section import SettingsSection

Profile = Literal["embedded", "distributed"]


class RunSettings(SettingsSection):
    """Which run this is, how long it runs, and the device and CPU threads of this process."""

    RESUMED: ClassVar[frozenset[str]] = frozenset({"run_id", "run_root", "profile", "seed", "device"})

    profile: Profile = "embedded"
    """Deployment profile: `embedded` (one process, no servers) or `distributed` (Redis, Postgres, SGLang, Docker)."""
    run_id: str = Field("default", pattern=r"^[A-Za-z0-9_.-]{1,64}$")
    """Name of the run; prefixes Redis keys (`azr:{run_id}:…`) and names the run directory."""
    run_root: Path = Path("runs")
    """Directory holding one sub-directory per run (resolved settings, metrics JSONL, checkpoints)."""
    seed: int = 0
    """Seed for sampling references, batches and generation."""
    steps: int = Field(1, ge=0)
    """Self-play steps (the paper's Table 3: 500; the released scripts: 960). `azr run` performs this many (with
    --resume, this many more); `azr coordinator` runs the run up to this step in total (a restart never overshoots)."""
    device: str = "auto"
    """Torch device for the local engine and trainer: `auto` (CUDA if present), `cpu`, `cuda`, `cuda:N`."""
    torch_threads: int = Field(0, ge=0)
    """Threads torch uses on the CPU in this process (inference and updates); N > 0 fixes it. 0: in the embedded run
    every core while no sandbox job runs (each update, most of generation) and one per core the executor's workers
    leave (at least one) while one does, because torch's spinning threads beside busy workers run several times
    slower (docs/benchmarks.md, embedded profile); in other processes always the latter rule."""

    @property
    def run_dir(self) -> Path:
        """This run's directory: resolved settings, metrics, checkpoints."""
        return self.run_root / self.run_id
