"""GenerationGate: an abort-mode pause aborts a running generation, holds new ones, and resume lets them run; close()
(the server stopping) aborts running generations and refuses waiting and new ones."""

from __future__ import annotations

import threading

import pytest

from services.inference.decoding import RawSample, RowSpec, decode_rows
from services.inference.generation_gate import GateClosed, GenerationGate
from services.inference.local_engine import LocalEngine


def start_endless_generation(gate: GenerationGate, engine: LocalEngine, result: list[RawSample]) -> threading.Thread:
    """A generation through `gate` that only an abort can end (no EOS ids, a huge budget), started in a thread;
    returns once it holds its in-flight slot. Its samples land in `result`."""
    entered = threading.Event()
    prompt = engine.codec.encode("def f(x):")

    def endless() -> None:
        with gate.generation() as abort:
            entered.set()
            result.extend(decode_rows(engine.model, [prompt], RowSpec(10**6, 1.0, 1.0, -1), eos_ids=set(),
                                      detokenize=engine.decode, generator=None, abort=abort))

    worker = threading.Thread(target=endless)
    worker.start()
    assert entered.wait(60)
    return worker


def test_abort_pause_stops_a_running_generation(tiny_engine: LocalEngine) -> None:
    gate = GenerationGate()
    result: list[RawSample] = []
    worker = start_endless_generation(gate, tiny_engine, result)
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


def test_close_aborts_the_running_generation_and_refuses_the_waiting_one(tiny_engine: LocalEngine) -> None:
    gate = GenerationGate()
    result: list[RawSample] = []
    refused: list[BaseException] = []
    running = start_endless_generation(gate, tiny_engine, result)

    def waiting() -> None:  # arrives while paused: without close() it would wait for a resume that never comes
        try:
            with gate.generation():
                pass
        except GateClosed as exc:
            refused.append(exc)

    gate.pause("in_place")  # stops new work only: the running generation goes on
    waiter = threading.Thread(target=waiting)
    waiter.start()
    waiter.join(0.3)
    assert waiter.is_alive() and running.is_alive()
    gate.close()
    running.join(10)
    waiter.join(10)
    assert not running.is_alive() and not waiter.is_alive()
    assert [sample.finish_reason for sample in result] == ["abort"]
    assert [str(exc) for exc in refused] == ["the server is shutting down"]
    assert gate.closed
    with pytest.raises(GateClosed):
        with gate.generation(wait_s=0.05):
            pass
    gate.resume()  # a late /continue_generation does not reopen it
    with pytest.raises(GateClosed):
        with gate.generation(wait_s=0.05):
            pass
