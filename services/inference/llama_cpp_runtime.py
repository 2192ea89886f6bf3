"""The few llama.cpp calls the llama.cpp engine makes, through llama-cpp-python's ctypes bindings.

One `LlamaModel` (weights, optionally with one LoRA adapter) and `LlamaContext`s: a KV cache of `sequences` streams
of `cells_per_sequence` cells each, one stream per sequence (llama.cpp's non-unified cache), flash attention off.
Why streams: in a unified cache every row's attention runs over every cell of every other row (masked), which on 2
AVX2 cores made 12 rows of 640-token prompts prefill at 28 tokens/s and decode at 561 ms a step, against 104 and
225 with one stream per sequence (flash attention, which skips masked cells: 88 and 271; measured alone). A copy
between streams copies the stream's whole buffer (llama.cpp supports no partial copy across streams): a shared
prefix is copied whole and the positions after it removed.
llama.cpp's own log lines are silenced (a weight update every step would print hundreds), but kept in a short
ring so an error can say what llama.cpp last said.

Only this module imports `llama_cpp`; `available()` tells whether it can (the engine falls back to the torch engine
where the package is not installed).
"""

from __future__ import annotations

import collections
import ctypes
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import cast

import numpy as np

from services.ports import InferenceError

_LOG_LINES: collections.deque[str] = collections.deque(maxlen=40)
_INIT_LOCK = threading.Lock()
_STATE: dict[str, object] = {}

LoraAdapter = object
"""A LoRA adapter llama.cpp loaded: an opaque C pointer, only handed back to llama.cpp."""

QUANT_TYPES = {"q8_0": 7, "q4_0": 2, "f16": 1}
"""llama.cpp file types (LLAMA_FTYPE_MOSTLY_*) a base model can be requantized to."""


def available() -> str | None:
    """None when llama-cpp-python imports, else why not (a line for logs and errors)."""
    try:
        import llama_cpp  # noqa: F401
    except (ImportError, OSError) as error:  # OSError: the shared library failed to load
        return f"llama-cpp-python is not usable here ({type(error).__name__}: {error}); `make engine` builds it"
    return None


def _lib() -> ModuleType:
    """The bindings, initialised once per process (backend init, log capture)."""
    with _INIT_LOCK:
        if "lib" not in _STATE:
            import llama_cpp

            llama_cpp.llama_backend_init()

            @llama_cpp.llama_log_callback
            def capture(level: int, text: bytes, _user: object) -> None:
                line = text.decode("utf-8", "replace").rstrip()
                if line:
                    _LOG_LINES.append(line)

            _STATE["callback"] = capture  # keep the C callback alive
            llama_cpp.llama_log_set(capture, ctypes.c_void_p(0))
            _STATE["lib"] = llama_cpp
        return cast(ModuleType, _STATE["lib"])


def recent_log(lines: int = 5) -> str:
    """What llama.cpp logged last, for error messages."""
    return " | ".join(list(_LOG_LINES)[-lines:])


def quantize(source: Path, target: Path, file_type: str, threads: int) -> Path:
    """Requantize the GGUF model ``source`` to ``file_type`` (`QUANT_TYPES`) at ``target`` (atomic)."""
    lib = _lib()
    params = lib.llama_model_quantize_default_params()
    params.ftype = QUANT_TYPES[file_type]
    params.allow_requantize = True
    params.nthread = threads
    staging = target.with_name(f".{target.name}.partial")
    if lib.llama_model_quantize(str(source).encode(), str(staging).encode(), ctypes.byref(params)) != 0:
        staging.unlink(missing_ok=True)
        raise InferenceError(f"llama.cpp could not requantize {source} to {file_type}: {recent_log()}")
    staging.rename(target)
    return target


class LlamaModel:
    """Weights loaded by llama.cpp (memory-mapped) and the LoRA adapter applied to them, if any."""

    def __init__(self, gguf: Path) -> None:
        self.lib = _lib()
        params = self.lib.llama_model_default_params()
        params.n_gpu_layers = 0
        self.handle = self.lib.llama_model_load_from_file(str(gguf).encode(), params)
        if not self.handle:
            raise InferenceError(f"llama.cpp could not load {gguf}: {recent_log()}")
        self.path = Path(gguf)
        vocab = self.lib.llama_model_get_vocab(self.handle)
        self.vocab_size = int(self.lib.llama_vocab_n_tokens(vocab))

    def load_adapter(self, gguf: Path) -> LoraAdapter:
        """A LoRA adapter (GGUF) for this model; freed with `free_adapter` or with the model."""
        adapter = self.lib.llama_adapter_lora_init(self.handle, str(gguf).encode())
        if not adapter:
            raise InferenceError(f"llama.cpp could not load the LoRA adapter {gguf}: {recent_log()}")
        return adapter

    def free_adapter(self, adapter: LoraAdapter) -> None:
        self.lib.llama_adapter_lora_free(adapter)

    def close(self) -> None:
        if self.handle:
            self.lib.llama_model_free(self.handle)
            self.handle = None


@dataclass(frozen=True)
class Token:
    """One position of a batch: which sequence, where, and whether its logits are wanted."""

    token: int
    position: int
    sequence: int
    logits: bool


CELL_ALIGNMENT = 256
"""llama.cpp pads a stream's size to this many cells."""


class LlamaContext:
    """A KV cache over one model: `sequences` streams of `cells_per_sequence` cells (sequence i is stream i), and a
    reusable batch of `batch_tokens`."""

    def __init__(self, model: LlamaModel, *, sequences: int, cells_per_sequence: int, batch_tokens: int,
                 threads: int) -> None:
        lib = self.lib = model.lib
        cells = -(-cells_per_sequence // CELL_ALIGNMENT) * CELL_ALIGNMENT
        params = lib.llama_context_default_params()
        params.n_ctx = sequences * cells
        params.n_batch = params.n_ubatch = batch_tokens
        params.n_seq_max = sequences
        params.n_threads = params.n_threads_batch = threads
        params.kv_unified = False
        params.flash_attn_type = 0  # disabled
        params.no_perf = True
        self.handle = lib.llama_init_from_model(model.handle, params)
        if not self.handle:
            raise InferenceError(f"llama.cpp could not create a cache of {sequences} sequences x {cells} cells: "
                                 f"{recent_log()}")
        self.model = model
        self.max_sequences = sequences
        self.cells_per_sequence = cells
        self.batch_tokens = batch_tokens
        self.memory = lib.llama_get_memory(self.handle)
        self._batch = lib.llama_batch_init(batch_tokens, 0, 1)
        self._threads = threads
        self._adapter: LoraAdapter | None = None

    def set_threads(self, threads: int) -> None:
        if threads != self._threads:
            self.lib.llama_set_n_threads(self.handle, threads, threads)
            self._threads = threads

    def set_adapter(self, adapter: LoraAdapter | None) -> None:
        """Serve through ``adapter`` (None: the bare model) from the next decode on."""
        if adapter is None:
            result = self.lib.llama_set_adapters_lora(self.handle, None, 0, None)
        else:
            adapters = (self.lib.llama_adapter_lora_p_ctypes * 1)(adapter)
            scales = (ctypes.c_float * 1)(1.0)
            result = self.lib.llama_set_adapters_lora(self.handle, adapters, 1, scales)
        if result != 0:
            raise InferenceError(f"llama.cpp refused the LoRA adapter ({result}): {recent_log()}")
        self._adapter = adapter

    def clear(self) -> None:
        """Forget every sequence's cache."""
        self.lib.llama_memory_clear(self.memory, True)

    def copy_sequence(self, source: int, target: int, end: int = -1) -> None:
        """Give sequence ``target`` ``source``'s cache positions [0, end) (-1: all): the whole stream is copied (at
        the next decode), then the positions from ``end`` on are dropped."""
        self.lib.llama_memory_seq_cp(self.memory, source, target, -1, -1)
        if end >= 0:
            self.lib.llama_memory_seq_rm(self.memory, target, end, -1)

    def drop_sequence(self, sequence: int) -> None:
        self.lib.llama_memory_seq_rm(self.memory, sequence, -1, -1)

    def decode(self, tokens: Sequence[Token]) -> np.ndarray:
        """Run one batch (at most `batch_tokens`); returns the logits [outputs, vocab] (float32, a copy) of the
        tokens marked `logits`, in batch order."""
        if not 0 < len(tokens) <= self.batch_tokens:
            raise ValueError(f"a batch holds 1..{self.batch_tokens} tokens, not {len(tokens)}")
        batch = self._batch
        batch.n_tokens = len(tokens)
        outputs = 0
        for i, item in enumerate(tokens):
            batch.token[i] = item.token
            batch.pos[i] = item.position
            batch.n_seq_id[i] = 1
            batch.seq_id[i][0] = item.sequence
            batch.logits[i] = 1 if item.logits else 0
            outputs += item.logits
        result = self.lib.llama_decode(self.handle, batch)
        if result != 0:
            what = "the KV cache is full" if result == 1 else f"error {result}"
            raise InferenceError(f"llama.cpp decode failed ({what}): {recent_log()}")
        if not outputs:
            return np.empty((0, self.model.vocab_size), dtype=np.float32)
        logits = self.lib.llama_get_logits(self.handle)
        return np.ctypeslib.as_array(logits, shape=(outputs, self.model.vocab_size)).copy()

    def close(self) -> None:
        if self.handle:
            self.lib.llama_batch_free(self._batch)
            self.lib.llama_free(self.handle)
            self.handle = None
