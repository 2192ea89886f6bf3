"""`azr serve inference` stops on SIGTERM even while a request waits on a paused generation (what a trainer that
paused the server and then died leaves behind): the waiting request is answered 503 and the process exits. Before
`ApiProcess.on_stop`, uvicorn's graceful shutdown waited for that request for good and only SIGKILL ended it."""

from __future__ import annotations

import signal
import threading
import time

import httpx
import pytest
from inference_servers import InferenceServerProcess


@pytest.mark.slow
def test_sigterm_ends_a_server_whose_generation_is_paused() -> None:
    server = InferenceServerProcess("tiny")
    try:
        server.wait_ready()
        paused = httpx.post(f"{server.url}/pause_generation", json={"mode": "in_place"}, timeout=30)
        assert paused.status_code == 200, paused.text
        answers: list[httpx.Response] = []
        waiting = threading.Thread(target=lambda: answers.append(httpx.post(
            f"{server.url}/generate", json={"text": "def f(x):", "sampling_params": {"max_new_tokens": 4}},
            timeout=120)))
        waiting.start()
        time.sleep(2)  # the request is in, waiting on the pause (a loopback POST takes milliseconds)
        assert waiting.is_alive() and not answers, "the request should be held by the pause"
        server.process.send_signal(signal.SIGTERM)
        status = server.process.wait(timeout=60)  # TimeoutExpired: the shutdown still waits on the request
        waiting.join(30)
        assert status in (0, -signal.SIGTERM)  # uvicorn re-raises the signal it caught once it has shut down
        assert [answer.status_code for answer in answers] == [503]
        assert answers[0].json()["message"] == "the server is shutting down"
    finally:
        server.stop()
