"""GenerationGate: an abort-mode pause aborts a running generation, holds new ones, and resume lets them run."""

from __future__ import annotations

import threading

import pytest

from services.inference.decoding import RawSample, RowSpec, decode_rows
from services.inference.generation_gate import GenerationGate
from services.inference.local_engine import LocalEngine


def test_abort_pause_stops_a_running_generation(tiny_engine: LocalEngine) -> None:
    gate = GenerationGate()
    entered = threading.Event()
    result: list[RawSample] = []
    prompt = tiny_engine.codec.encode("def f(x):")

    def endless() -> None:
        with gate.generation() as abort:
            entered.set()
            # No EOS ids and a huge budget: only the abort can end it.
            result.extend(decode_rows(tiny_engine.model, [prompt], RowSpec(10**6, 1.0, 1.0, -1), eos_ids=set(),
                                      detokenize=tiny_engine.decode, generator=None, abort=abort))

    worker = threading.Thread(target=endless)
    worker.start()
    assert entered.wait(60)
    assert gate.pause("abort") == 1  # returns only once the running generation has ended
    worker.join(10)
    assert not worker.is_alive()
    assert [sample.finish_reason for sample in result] == ["abort"]
    assert len(result[0].logprobs) == len(result[0].output_ids)
    assert gate.paused and not gate.abort.is_set()
    with pytest.raises(TimeoutError):
        with gate.generation(wait_s=0.05):
            pass
    gate.resume()
    with gate.generation(wait_s=0.05) as abort:
        assert not abort.is_set()


def test_updating_is_visible_while_held() -> None:
    gate = GenerationGate()
    assert not gate.busy_updating
    with gate.updating():
        assert gate.busy_updating
    assert not gate.busy_updating
