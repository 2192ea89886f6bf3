"""A line every few seconds while one long, opaque call runs (a GGUF conversion, a checkpoint write), so a person
watching sees that it is alive and how long it has taken. The call itself reports nothing; this thread does."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

HEARTBEAT_EVERY_S = 10.0
"""Longest silence while a heartbeat runs."""


@contextmanager
def heartbeat(say: Callable[[str], None] | None, what: str, every_s: float = HEARTBEAT_EVERY_S) -> Iterator[None]:
    """Say `what` now, `still <what>: N s` every `every_s` seconds until the block ends, then `<what>: done in N s`
    (or `<what>: failed after N s` when it raises). `say` None: nothing is said and no thread starts."""
    if say is None:
        yield
        return
    began = time.perf_counter()
    stop = threading.Event()

    def beat() -> None:
        while not stop.wait(every_s):
            say(f"still {what}: {time.perf_counter() - began:.0f} s")

    say(what)
    thread = threading.Thread(target=beat, name="azr-heartbeat", daemon=True)
    thread.start()
    outcome = "failed after"
    try:
        yield
        outcome = "done in"
    finally:
        stop.set()
        thread.join()
        say(f"{what}: {outcome} {time.perf_counter() - began:.0f} s")
