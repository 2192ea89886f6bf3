"""Which in-process engine a process runs (`local_engine`), and the GGUF the llama.cpp engine loads.

`auto` takes llama.cpp on a CPU where llama-cpp-python imports and the torch engine elsewhere (CUDA, or the package
missing), and says which and why; `llama-cpp` insists (InferenceError naming `make engine` when it cannot run);
`torch` is the transformers engine.

The GGUF of a model directory: a registry model's own release (verified; its HF directory is the conversion of that
very file, so engine and trainer start from the same weights), else a float32 GGUF written once from the directory
into the model cache (the tiny model, a hub snapshot, a full fine-tuning checkpoint).
"""

from __future__ import annotations

import hashlib
import json
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


def gguf_for(model_dir: Path, cache_root: Path | None = None, say: Say | None = None) -> Path:
    """The GGUF holding ``model_dir``'s weights (see the module docstring)."""
    root = cache_root or default_cache_root()
    model_dir = Path(model_dir).resolve()
    for release in RELEASES.values():
        if converted_model_path(release, root).resolve() == model_dir:
            return resolve_gguf(release.name, root, say)
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
    from services.inference.llama_cpp_engine import LlamaCppEngine

    return LlamaCppEngine(model_dir, gguf_for(model_dir, say=say), base_form=settings.llama_cpp_base,
                          seed=run.seed if seed is None else seed,
                          context_tokens=settings.llama_cpp_context_tokens,
                          max_sequences=settings.llama_cpp_sequences,
                          threads=run.torch_threads or available_cores(), hooks=hooks)
