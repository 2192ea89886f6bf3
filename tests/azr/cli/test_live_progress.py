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


def test_a_prefill_is_reported_when_it_starts_and_every_few_seconds_off_a_terminal(monkeypatch) -> None:
    stream = io.StringIO()
    display = RunDisplay(stream, live=False)
    clock = iter([0.0, 4.0, 10.5, 12.0])
    monkeypatch.setattr(live_progress.time, "perf_counter", lambda: next(clock))
    for prefilled in (100, 200, 300):
        display.decode_step(DecodeProgress(step=0, max_new_tokens=8, rows=6, live=6, tokens=0, prefilled=prefilled,
                                           prompt_width=300))
    display.decode_step(steps(1, rows=6)[0])
    lines = stream.getvalue().splitlines()
    assert lines[:2] == [
        "generation: prefilling 6 prompts, 100/300 prompt positions",  # at once: the batch has begun
        "generation: prefilling 6 prompts, 300/300 prompt positions",  # 10.5 s after the first line
    ]
    assert len(lines) == 3 and lines[2].startswith("generation: step 1/1, 0/6 rows decoding, 6 tokens")


def test_on_a_terminal_the_prefill_and_the_decoding_each_get_a_bar() -> None:
    stream = io.StringIO()
    display = RunDisplay(stream, live=True)
    display.decode_step(DecodeProgress(step=0, max_new_tokens=3, rows=2, live=2, tokens=0, prefilled=64,
                                       prompt_width=128))
    assert display._task is not None
    prefill_task = display._task
    for event in steps(3, rows=2):
        display.decode_step(event)
    assert display._task != prefill_task
    display.close()
    assert "generation" in stream.getvalue()
