"""Generation through the APIs is bounded (issue 37): `sampling.max_new_tokens` is clamped to the settings'
`max_response_tokens` on `POST /v1/propose` and `POST /v1/solve`, and a generation whose client went away stops
(the local engine, at its next token) instead of running on for nobody. Real uvicorn, the tiny model."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from proposer_servers import serve, settings_for
from throwaway_servers import LoopbackServer

from solver_api.app import create_solver_app

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def engine() -> Iterator[Any]:
    from services.inference.local_engine import LocalEngine
    from services.inference.tiny_model import tiny_model_dir

    yield LocalEngine(tiny_model_dir(), device="cpu", seed=5)


def test_max_new_tokens_is_clamped_on_both_routes(embedded_api, sandbox, engine, cruxeval_rows) -> None:
    app_settings = settings_for(embedded_api.token, max_response_tokens=3)
    row = cruxeval_rows[5]
    sampling = {"max_new_tokens": 10**9, "temperature": 1.0, "seed": 1}
    headers = {"Authorization": f"Bearer {embedded_api.token}"}
    with serve(app_settings, embedded_api.store, sandbox, engine=engine) as proposer_url, \
            LoopbackServer(create_solver_app(app_settings.api, app_settings.rollout, sandbox,
                                             engine=engine)) as solver_url:
        references = [{"program": row["code"], "input": row["input"], "output": row["output"]}]
        proposed = httpx.post(f"{proposer_url}/v1/propose", headers=headers, timeout=120,
                              json={"task_type": "deduction", "references": references, "sampling": sampling,
                                    "count": 2})
        task = {"program": row["code"], "input": row["input"], "output": row["output"]}
        solved = httpx.post(f"{solver_url}/v1/solve", headers=headers, timeout=120,
                            json={"task_type": "deduction", "tasks": [task], "sampling": sampling, "n": 2})
    assert proposed.status_code == 200 and solved.status_code == 200, (proposed.text, solved.text)
    lengths = [len(p["response_ids"]) for p in proposed.json()["proposals"]]
    lengths += [len(s["response_ids"]) for group in solved.json()["solutions"] for s in group]
    assert lengths and max(lengths) <= 3, lengths


def test_generation_stops_when_the_client_goes(embedded_api, sandbox, engine, cruxeval_rows) -> None:
    """Before: a request ran 120 s and generation went on after the client left."""
    steps: list[int] = []
    engine.on_decode_step = lambda progress: steps.append(progress.step)
    row = cruxeval_rows[5]
    app_settings = settings_for(embedded_api.token, max_response_tokens=6000)
    body = {"task_type": "deduction", "count": 8, "sampling": {"max_new_tokens": 6000, "temperature": 1.0, "seed": 3},
            "references": [{"program": row["code"], "input": row["input"], "output": row["output"]}]}
    try:
        with serve(app_settings, embedded_api.store, sandbox, engine=engine) as url:
            payload = json.dumps(body).encode()
            head = (f"POST /v1/propose HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                    f"Authorization: Bearer {embedded_api.token}\r\nContent-Length: {len(payload)}\r\n\r\n")
            port = int(url.rsplit(":", 1)[1])
            connection = socket.create_connection(("127.0.0.1", port), timeout=10)
            connection.sendall(head.encode() + payload)
            deadline = time.monotonic() + 120
            while max(steps, default=0) < 20 and time.monotonic() < deadline:
                time.sleep(0.05)
            assert max(steps, default=0) >= 20, "generation never started"
            connection.close()  # the client goes away mid-generation
            left_at = max(steps)
            time.sleep(3)
            settled = max(steps)
            time.sleep(1)
            assert max(steps) == settled, "generation still runs for a client that left"
            assert settled < left_at + 200 and settled < 6000, (left_at, settled)
    finally:
        engine.on_decode_step = None
