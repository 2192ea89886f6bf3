"""`azr run`'s display (azr/cli/live_progress.py): plain progress lines off a terminal, a live bar on one."""

from __future__ import annotations

import io

from azr.cli import live_progress
from azr.cli.live_progress import RunDisplay
from services.inference.decoding import DecodeProgress


def steps(count: int, rows: int = 4) -> list[DecodeProgress]:
    return [DecodeProgress(step=s, max_new_tokens=count, rows=rows, live=rows if s < count else 0, tokens=s * rows)
            for s in range(1, count + 1)]


def test_off_a_terminal_progress_comes_as_plain_lines_not_too_often(monkeypatch) -> None:
    stream = io.StringIO()
    display = RunDisplay(stream, live=False)
    clock = iter([0.0, 2.0, 3.0, 11.0, 12.0])  # one reading per decoding step
    monkeypatch.setattr(live_progress.time, "perf_counter", lambda: next(clock))
    display.say("step 1: propose")
    for event in steps(5):
        display.decode_step(event)
    lines = stream.getvalue().splitlines()
    assert lines[0] == "step 1: propose"
    # step 1 starts the clock; step 4 comes 11 s later -> a line; step 5 ends the batch -> a line
    assert lines[1] == "generation: step 4/5, 4/4 rows decoding, 16 tokens, 1.5 tok/s"
    assert lines[2].startswith("generation: step 5/5, 0/4 rows decoding, 20 tokens")
    assert len(lines) == 3


def test_on_a_terminal_a_bar_is_drawn_and_messages_still_print() -> None:
    stream = io.StringIO()
    display = RunDisplay(stream, live=True)
    for event in steps(3):
        display.decode_step(event)
    display.say("seeding round 1")
    display.close()
    display.close()
    out = stream.getvalue()
    assert "seeding round 1" in out and "generation" in out
