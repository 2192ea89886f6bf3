"""What a process hears from, and tells, an engine in it while it generates: given when the engine is built."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from services.inference.decoding import DecodeProgress


@dataclass(frozen=True)
class GenerationHooks:
    """Callbacks of an in-process engine (each optional; an engine calls those it has a use for)."""

    on_decode_step: Callable[[DecodeProgress], None] | None = None
    """After every decoding step of every batch (a live progress display)."""
    before_forward: Callable[[], None] | None = None
    """The torch engine: before every forward pass of generation (the embedded run sets torch's thread count)."""
    generation_threads: Callable[[], int] | None = None
    """The llama.cpp engine: how many threads the next forward uses (the embedded run: fewer while sandbox jobs run)."""


NO_HOOKS = GenerationHooks()
