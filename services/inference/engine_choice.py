"""Which in-process engine a process runs (`local_engine`), and the GGUF the llama.cpp engine loads.

`auto` takes llama.cpp on a CPU where llama-cpp-python imports and the torch engine elsewhere (CUDA, or the package
missing), and says which and why; `llama-cpp` insists (InferenceError naming `make engine` when it cannot run);
`torch` is the transformers engine.

The GGUF of a model directory: a registry model's own release (verified; its HF directory is the conversion of that
very file, so engine and trainer start from the same weights); a run's checkpoint (full fine-tuning) is converted by
the engine into its own scratch directory, removed when it closes (one file per resume or probe in the shared cache
grew without bound); any other directory (the tiny model, a hub snapshot) is written once as float32 into the
model cache.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Literal, Union

from services.inference import llama_cpp_runtime
from services.inference.generation_hooks import NO_HOOKS, GenerationHooks
from services.inference.model_registry import (
    RELEASES,
    converted_model_path,
    default_cache_root,
    resolve_gguf,
)
from services.ports import InferenceError
from services.settings import InferenceSettings, RunSettings

if TYPE_CHECKING:
    from services.inference.llama_cpp_engine import LlamaCppEngine
    from services.inference.local_engine import LocalEngine

InProcessEngine = Union["LocalEngine", "LlamaCppEngine"]
"""An engine in this process (both implement `services.ports.InferenceEngine`, `sample` with abort and seeds, and
the `codec` / `vocab_size` / `model_info` that `azr serve inference` reads)."""

EngineKind = Literal["torch", "llama-cpp"]
Say = Callable[[str], None]


def engine_kind(settings: InferenceSettings, run: RunSettings) -> tuple[EngineKind, str]:
    """(the engine `settings` asks for on this machine and the run's device, why), InferenceError when `llama-cpp`
    cannot run."""
    from services.inference.local_engine import pick_device

    choice = settings.local_engine
    if choice == "torch":
        return "torch", "AZR_LOCAL_ENGINE=torch"
    device = pick_device(run.device)
    missing = llama_cpp_runtime.available()
    if choice == "llama-cpp":
        if device.type != "cpu":
            raise InferenceError(f"local_engine = llama-cpp runs on the CPU; the device is {device} "
                                 "(AZR_DEVICE=cpu, or AZR_LOCAL_ENGINE=torch)")
        if missing is not None:
            raise InferenceError(missing)
        return "llama-cpp", "AZR_LOCAL_ENGINE=llama-cpp"
    if device.type != "cpu":
        return "torch", f"the device is {device} (llama.cpp here serves CPUs)"
    if missing is not None:
        return "torch", missing
    return "llama-cpp", "llama-cpp-python is installed and the device is the CPU"


CHECKPOINT_MARKER = "trainer_state.pt"
"""The file a trainer checkpoint directory holds (trainer_svc/checkpoints.py, `TRAINER_STATE_FILE`)."""


LEGACY_CHECKPOINT_GGUF = re.compile(r"(v\d{6}-[0-9a-f]{12}(\.(q8_0|q4_0|f16))?\.gguf|\.pushed-.+\.new)")
"""What versions before the engine's scratch directory left in the cache's gguf/ and nothing reads: a checkpoint
directory's conversion (checkpoints are named vNNNNNN), requantized or not, and each full push's GGUF."""


def remove_legacy_ggufs(cache_root: Path | None = None) -> list[Path]:
    """Remove `LEGACY_CHECKPOINT_GGUF` files from the cache (a file still mapped by a running process stays readable
    to it); returns them."""
    directory = (cache_root or default_cache_root()) / "gguf"
    if not directory.is_dir():
        return []
    stale = [path for path in directory.iterdir() if LEGACY_CHECKPOINT_GGUF.fullmatch(path.name) and path.is_file()]
    for path in stale:
        path.unlink(missing_ok=True)
    return stale


def gguf_for(model_dir: Path, cache_root: Path | None = None, say: Say | None = None) -> Path | None:
    """The GGUF holding ``model_dir``'s weights, or None for a run's checkpoint, which the engine converts into its
    scratch directory (see the module docstring)."""
    root = cache_root or default_cache_root()
    model_dir = Path(model_dir).resolve()
    for release in RELEASES.values():
        if converted_model_path(release, root).resolve() == model_dir:
            return resolve_gguf(release.name, root, say)
    if (model_dir / CHECKPOINT_MARKER).is_file():
        return None
    from services.inference.gguf_export import write_model_gguf

    target = root / "gguf" / f"{model_dir.name}-{_directory_digest(model_dir)}.gguf"
    if not target.is_file():
        target.parent.mkdir(parents=True, exist_ok=True)
        if say is not None:
            say(f"writing {model_dir} as a GGUF for the llama.cpp engine (once): {target}")
        write_model_gguf(model_dir, target, dtype="f32")
    return target


def _directory_digest(model_dir: Path) -> str:
    """Names a directory's weights: its config and each weight file's name, size and modification time."""
    parts = [json.dumps(json.loads((model_dir / "config.json").read_text()), sort_keys=True)]
    for path in sorted(model_dir.glob("*.safetensors")):
        stat = path.stat()
        parts.append(f"{path.name}:{stat.st_size}:{stat.st_mtime_ns}")
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:12]


def build_local_engine(model_dir: Path, settings: InferenceSettings, run: RunSettings, *, seed: int | None = None,
                       max_batch_rows: int = 32, say: Say | None = None,
                       hooks: GenerationHooks = NO_HOOKS) -> InProcessEngine:
    """The in-process engine `settings` asks for, serving ``model_dir`` on the run's device with the run's seed
    (unless given) and threads."""
    kind, why = engine_kind(settings, run)
    if kind == "torch":
        from services.inference.local_engine import LocalEngine

        if say is not None and settings.local_engine == "auto":
            say(f"generating with the torch engine: {why}")
        return LocalEngine.from_settings(model_dir, settings, run, seed=seed, max_batch_rows=max_batch_rows,
                                         hooks=hooks)
    from services.compute.torch_threads import available_cores
    from services.inference.llama_cpp_engine import SCRATCH_DIR_NAME, LlamaCppEngine

    removed = remove_legacy_ggufs()
    if removed and say is not None:
        say(f"removed {len(removed)} GGUF file(s) of earlier runs' checkpoints and pushes from the model cache")
    gguf = gguf_for(model_dir, say=say)
    if gguf is None and say is not None:
        say(f"writing the checkpoint {model_dir} as a GGUF for the llama.cpp engine (removed when it closes)")
    return LlamaCppEngine(model_dir, gguf, base_form=settings.llama_cpp_base,
                          scratch_root=default_cache_root() / "gguf" / SCRATCH_DIR_NAME,
                          seed=run.seed if seed is None else seed,
                          context_tokens=settings.llama_cpp_context_tokens,
                          max_sequences=settings.llama_cpp_sequences,
                          threads=run.torch_threads or available_cores(), hooks=hooks)
