"""`GenerationGate`: the pause / abort / in-flight bookkeeping of `azr serve inference`, as SGLang behaves.

- While paused, new generations wait until `resume()` (SGLang: requests block on a condition until
  `/continue_generation`).
- `pause("abort")` aborts running generations (they return what they had with finish_reason `abort`) and returns
  once none is in flight. Other modes only stop new work: the local engine cannot retract a running batch, so
  those generations finish normally.
- `updating()` marks a weight swap, during which `/health` reports 503.
- `close()` (the process got SIGTERM or Ctrl-C) aborts running generations and refuses waiting and new ones with
  `GateClosed`: without it a request waiting on a pause the trainer never lifted (it died) held the server's
  graceful shutdown open for good.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager


class GateClosed(Exception):
    """The server is shutting down: no generation starts any more."""


class GenerationGate:
    """Thread-safe gate in front of the engine; one per server."""

    def __init__(self) -> None:
        """Open, nothing in flight."""
        self._cond = threading.Condition()
        self._paused = False
        self._updating = 0
        self._in_flight = 0
        self._closed = False
        self.abort = threading.Event()
        """Set while an abort-mode pause drains running generations; the engine checks it between tokens."""

    @property
    def paused(self) -> bool:
        """Whether new generations are held back."""
        with self._cond:
            return self._paused

    @property
    def closed(self) -> bool:
        """Whether the server is shutting down (`close()`)."""
        with self._cond:
            return self._closed

    @property
    def busy_updating(self) -> bool:
        """Whether a weight update is running."""
        with self._cond:
            return self._updating > 0

    @contextmanager
    def generation(self, wait_s: float | None = None) -> Iterator[threading.Event]:
        """Hold one in-flight slot, waiting first while paused; yields the abort event. TimeoutError when still
        paused after `wait_s` seconds (None: wait as long as it takes); GateClosed once the server is stopping."""
        with self._cond:
            if not self._cond.wait_for(lambda: not self._paused or self._closed, timeout=wait_s):
                raise TimeoutError("generation is paused")
            if self._closed:
                raise GateClosed("the server is shutting down")
            self._in_flight += 1
        try:
            yield self.abort
        finally:
            with self._cond:
                self._in_flight -= 1
                self._cond.notify_all()

    def pause(self, mode: str) -> int:
        """Stop new generations; in `abort` mode also abort the running ones and wait for them. Returns how many
        were in flight when the pause began."""
        with self._cond:
            self._paused = True
            running = self._in_flight
            if mode == "abort":
                self.abort.set()
                self._cond.wait_for(lambda: self._in_flight == 0)
                if not self._closed:
                    self.abort.clear()
        return running

    def close(self) -> None:
        """Stop for good: running generations are aborted (they return what they have, finish_reason `abort`, which
        a client resumes elsewhere), waiting and new ones raise GateClosed. Returns at once."""
        with self._cond:
            self._closed = True
            self.abort.set()
            self._cond.notify_all()

    def resume(self) -> None:
        """Let generations run again."""
        with self._cond:
            self._paused = False
            self._cond.notify_all()

    @contextmanager
    def updating(self) -> Iterator[None]:
        """Mark a weight update (health reports 503 meanwhile)."""
        with self._cond:
            self._updating += 1
        try:
            yield
        finally:
            with self._cond:
                self._updating -= 1
