"""`POST /v1/seeds` in the embedded profile over real HTTP: storing, duplicates, rejections, auth, body limits."""

from __future__ import annotations

import httpx

from services.algorithm.task_types import TaskType
from services.records import TripletSource

HOSTILE_SYSTEM = "def f(x):\n    return __import__('os').system('touch /tmp/azr-pwned')"
"""A dynamic import of os to run a shell: the executor refuses it before running (forbidden)."""
INFINITE_LOOP = "def f(x):\n    while True:\n        x += 1\n    return x"


def test_program_seed_is_stored_in_both_buffers_then_reported_duplicate(embedded_api, cruxeval_rows) -> None:
    row = cruxeval_rows[0]
    with embedded_api.client() as client:
        first = client.post("/v1/seeds", json={"kind": "program", "program": row["code"], "input": row["input"]})
        assert first.status_code == 201, first.text
        body = first.json()
        assert [(o["buffer"], o["created"]) for o in body["outcomes"]] == [("deduction", True), ("abduction", True)]
        assert [e["output"] for e in body["entries"]] == [row["output"]] * 2
        assert {e["source"] for e in body["entries"]} == {"user"}
        again = client.post("/v1/seeds", json={"kind": "program", "program": row["code"], "input": row["input"]})
        assert again.status_code == 200
        assert [o["id"] for o in again.json()["outcomes"]] == [o["id"] for o in body["outcomes"]]
        assert not any(o["created"] for o in again.json()["outcomes"])
        stored = client.get(f"/v1/buffers/deduction/{body['outcomes'][0]['id']}").json()
        assert (stored["program"], stored["input"], stored["output"]) == (row["code"], row["input"], row["output"])
    assert embedded_api.store.count(TaskType.DEDUCTION) == embedded_api.store.count(TaskType.ABDUCTION)


def test_seed_into_one_buffer_as_a_user_entry(embedded_api, cruxeval_rows) -> None:
    """A submission is a `user` entry (evicted like proposals): `seed` entries come only from `azr seeds import`."""
    row = cruxeval_rows[1]
    before = embedded_api.store.count(TaskType.DEDUCTION)
    with embedded_api.client() as client:
        response = client.post("/v1/seeds", json={"kind": "program", "program": row["code"], "input": row["input"],
                                                  "buffers": ["abduction"], "source": "user"})
    assert response.status_code == 201
    assert [o["buffer"] for o in response.json()["outcomes"]] == ["abduction"]
    entry = embedded_api.store.get(TaskType.ABDUCTION, response.json()["outcomes"][0]["id"])
    assert entry is not None and entry.source == TripletSource.USER
    assert embedded_api.store.count(TaskType.DEDUCTION) == before


def test_induction_seed_gets_outputs_from_the_executor(embedded_api) -> None:
    seed = {"kind": "induction", "program": "def f(a, b):\n    return a * b + 1",
            "inputs": ["1, 2", "3, 4", "0, 9", "-2, 5"], "message": "Multiply, then add one."}
    with embedded_api.client() as client:
        response = client.post("/v1/seeds", json=seed)
        assert response.status_code == 201, response.text
        (entry,) = response.json()["entries"]
        assert entry["outputs"] == ["3", "13", "1", "-9"]
        assert client.post("/v1/seeds", json=seed).status_code == 200


def test_rejected_seeds_get_422_with_the_executor_status_and_nothing_is_stored(embedded_api) -> None:
    counts = [embedded_api.store.count(t) for t in TaskType]
    cases = [
        ({"kind": "program", "program": HOSTILE_SYSTEM, "input": "1"}, "forbidden"),
        ({"kind": "program", "program": INFINITE_LOOP, "input": "1"}, "timeout"),
        ({"kind": "program", "program": "def f(x):\n    return x[5]", "input": "[1]"}, "runtime_error"),
        ({"kind": "program", "program": "def f(x:\n    return x", "input": "1"}, "syntax_error"),
        ({"kind": "induction", "program": "def f(x):\n    return 10 // x", "inputs": ["1", "0", "2"], "message": "m"},
         "runtime_error"),
    ]
    with embedded_api.client() as client:
        for body, status in cases:
            response = client.post("/v1/seeds", json=body)
            assert response.status_code == 422, (status, response.text)
            assert response.json()["problem"] == "seed_rejected"  # not a malformed request: the executor's verdict
            assert response.json()["status"] == status
            assert response.json()["error"]
        induction = client.post("/v1/seeds", json=cases[-1][0]).json()
        assert induction["failed_index"] == 1
    assert [embedded_api.store.count(t) for t in TaskType] == counts


def test_write_routes_need_the_bearer_token(embedded_api, cruxeval_rows) -> None:
    body = {"kind": "program", "program": cruxeval_rows[2]["code"], "input": cruxeval_rows[2]["input"]}
    with embedded_api.client(token=None) as anonymous, embedded_api.client(token="not-the-token") as wrong:
        missing = anonymous.post("/v1/seeds", json=body)
        assert missing.status_code == 401 and missing.headers["www-authenticate"] == "Bearer"
        assert wrong.post("/v1/seeds", json=body).status_code == 403
        basic = anonymous.post("/v1/seeds", json=body, headers={"Authorization": "Basic dXNlcjpwYXNz"})
        assert basic.status_code == 401
        assert anonymous.get("/v1/buffers").status_code == 200  # reads are open
    assert embedded_api.store.count(TaskType.DEDUCTION) == 0


def test_malformed_bodies_get_422_with_field_reasons(embedded_api) -> None:
    with embedded_api.client() as client:
        missing = client.post("/v1/seeds", json={"kind": "program", "program": "def f(x):\n    return x"})
        assert missing.status_code == 422
        assert any(error["loc"][-1] == "input" and error["type"] == "missing" for error in missing.json()["detail"])
        wrong_buffer = client.post("/v1/seeds", json={"kind": "program", "program": "def f(x):\n    return x",
                                                      "input": "1", "buffers": ["induction"]})
        assert wrong_buffer.status_code == 422
        assert wrong_buffer.json()["detail"][0]["loc"][-2:] == ["buffers", 0]
        too_few = client.post("/v1/seeds", json={"kind": "induction", "program": "def f(x):\n    return x",
                                                 "inputs": ["1"], "message": "m"})
        assert too_few.status_code == 422 and too_few.json()["detail"][0]["loc"][-1] == "inputs"
        unknown_kind = client.post("/v1/seeds", json={"kind": "essay", "program": "x"})
        assert unknown_kind.status_code == 422 and "kind" in unknown_kind.text
        extra = client.post("/v1/seeds", json={"kind": "program", "program": "def f(x):\n    return x", "input": "1",
                                               "output": "2"})
        assert extra.status_code == 422 and extra.json()["detail"][0]["type"] == "extra_forbidden"
        not_json = client.post("/v1/seeds", content=b"{kind: program", headers={"Content-Type": "application/json"})
        assert not_json.status_code == 422
        for malformed in (missing, wrong_buffer, too_few, unknown_kind, extra, not_json):
            assert malformed.json()["problem"] == "invalid_request", malformed.text
        not_utf8 = client.post("/v1/seeds", content=b'{"kind": "\xff"}', headers={"Content-Type": "application/json"})
        assert not_utf8.status_code == 400 and not_utf8.json() == {"detail": "There was an error parsing the body"}
    assert embedded_api.store.count(TaskType.DEDUCTION) == 0


def test_oversized_bodies_get_413_declared_or_chunked(embedded_api) -> None:
    program = "def f(x):\n    return x  # " + "a" * 5000  # over the 4096-byte cap of this fixture
    body = {"kind": "program", "program": program, "input": "1"}
    with embedded_api.client() as client:
        declared = client.post("/v1/seeds", json=body)
        assert declared.status_code == 413

        def chunks():
            payload = httpx.Request("POST", "http://x", json=body).read()
            for start in range(0, len(payload), 1000):
                yield payload[start:start + 1000]

        chunked = client.post("/v1/seeds", content=chunks(), headers={"Content-Type": "application/json"})
        assert chunked.status_code == 413, chunked.text
        assert "4096" in chunked.json()["detail"]
    assert embedded_api.store.count(TaskType.DEDUCTION) == 0
