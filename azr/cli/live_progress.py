"""What `azr run` shows while it works: messages, and a live bar for every generation batch.

On a terminal a rich progress bar follows each decoding batch: first the prompts' prefill (positions done, in chunks),
then the decoding (steps done of `max_new_tokens`, rows still decoding, tokens sampled, tokens/s and an ETA that is
an upper bound: rows may stop early). Off a terminal (a log file, CI) the
same facts come as a plain line at most every `PLAIN_EVERY_S` seconds, so nothing is silent for long either way.
"""

from __future__ import annotations

import sys
import threading
import time
from typing import TextIO

from rich.console import Console
from rich.progress import BarColumn, Progress, TaskID, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from services.inference.decoding import DecodeProgress

PLAIN_EVERY_S = 10.0
"""Off a terminal, a generation progress line at most this often."""


class RunDisplay:
    """Messages and generation progress for one process; thread-safe (generation runs on the caller's thread,
    messages come from anywhere)."""

    def __init__(self, stream: TextIO | None = None, *, live: bool | None = None) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.live = self.stream.isatty() if live is None else live
        self.console = Console(file=self.stream, force_terminal=self.live, soft_wrap=True, highlight=False)
        self._lock = threading.Lock()
        self._progress: Progress | None = None
        self._task: TaskID | None = None
        self._batch_began = 0.0
        self._last_plain = 0.0
        self._phase = ""  # "prefill" or "decode": a new phase of a batch starts a new bar

    def say(self, message: str) -> None:
        """One message line (above the bar when one is shown)."""
        with self._lock:
            if self._progress is not None:
                self._progress.console.print(message)
            else:
                self.stream.write(message + "\n")
                self.stream.flush()

    def decode_step(self, progress: DecodeProgress) -> None:
        """Follow one decoding batch (the local engine's `on_decode_step`)."""
        with self._lock:
            now = time.perf_counter()
            if progress.step == 0:
                self._prefill_step(progress, now)
                return
            first = progress.step == 1
            if first:
                self._batch_began = now
                self._last_plain = now
                self._phase = "decode"
            elapsed = max(now - self._batch_began, 1e-9)
            rate = progress.tokens / elapsed
            detail = (f"{progress.live}/{progress.rows} rows decoding, {progress.tokens} tokens, "
                      f"{rate:.1f} tok/s")
            if self.live:
                done = progress.max_new_tokens if progress.live == 0 else progress.step
                self._show_bar(detail, new_task=first, completed=done, total=progress.max_new_tokens)
            elif now - self._last_plain >= PLAIN_EVERY_S or progress.live == 0:
                self._last_plain = now
                self.stream.write(f"generation: step {progress.step}/{progress.max_new_tokens}, {detail}\n")
                self.stream.flush()

    def _prefill_step(self, progress: DecodeProgress, now: float) -> None:
        first = self._phase != "prefill"
        self._phase = "prefill"
        detail = f"prefilling {progress.rows} prompts, {progress.prefilled}/{progress.prompt_width} prompt positions"
        if self.live:
            self._show_bar(detail, new_task=first, completed=progress.prefilled, total=progress.prompt_width)
        elif first or now - self._last_plain >= PLAIN_EVERY_S:
            self._last_plain = now
            self.stream.write(f"generation: {detail}\n")
            self.stream.flush()

    def _show_bar(self, detail: str, *, new_task: bool, completed: int, total: int) -> None:
        if self._progress is None:
            self._progress = Progress(TextColumn("generation"), BarColumn(), TextColumn("{task.completed}/"
                                      "{task.total}"), TextColumn("{task.fields[detail]}"), TimeElapsedColumn(),
                                      TimeRemainingColumn(), console=self.console, transient=True)
            self._progress.start()
        if new_task or self._task is None:
            if self._task is not None:
                self._progress.remove_task(self._task)
            self._task = self._progress.add_task("generation", total=total, detail=detail)
        self._progress.update(self._task, completed=completed, detail=detail)

    def close(self) -> None:
        """Stop the live bar (idempotent)."""
        with self._lock:
            if self._progress is not None:
                self._progress.stop()
                self._progress = None
                self._task = None
