"""Issue 37's findings on the APIs, over real HTTP (embedded profile: SQLite and the in-process sandbox): a seed may
not claim `source: seed`, submissions stop at a per-buffer quota, a program too deep for the static check is a
`forbidden` seed, NUL and lone surrogates are a 422 anywhere in a body, and no error body echoes the request."""

from __future__ import annotations

import json

import httpx
import pytest
from proposer_servers import serve, settings_for

from services.algorithm.task_types import TaskType

DEEP_SUM = "def f(x):\n    return " + " + ".join(["x"] * 600)


def post_raw(client: httpx.Client, text: str) -> httpx.Response:
    """POST /v1/seeds with `text` as the exact JSON body (escapes such as \\u0000 stay as written)."""
    return client.post("/v1/seeds", content=text.encode("ascii"), headers={"Content-Type": "application/json"})


def test_a_seed_cannot_claim_the_seed_source(embedded_api) -> None:
    """`seed` entries are never evicted: through the API only `user`, which is."""
    with embedded_api.client() as client:
        response = client.post("/v1/seeds", json={"kind": "program", "program": "def f(x):\n    return x",
                                                  "input": "1", "source": "seed"})
    assert response.status_code == 422 and response.json()["problem"] == "invalid_request"
    assert response.json()["detail"][0]["loc"][-1] == "source"


def test_submissions_stop_at_the_quota(tmp_path, sandbox) -> None:
    from services.store import open_store

    store = open_store(f"sqlite:///{tmp_path / 'buffers.sqlite3'}", create=True)
    headers = {"Authorization": "Bearer quota-test-token"}
    try:
        with serve(settings_for("quota-test-token", seed_submission_quota=2), store, sandbox) as url:
            codes = [httpx.post(f"{url}/v1/seeds", headers=headers, timeout=60,
                                json={"kind": "program", "program": f"def f(x):\n    return x + {k}", "input": "1",
                                      "buffers": ["deduction"]}).status_code for k in range(3)]
            refused = httpx.post(f"{url}/v1/seeds", headers=headers, timeout=60,
                                 json={"kind": "program", "program": "def f(x):\n    return -x", "input": "1",
                                       "buffers": ["deduction"]})
            other = httpx.post(f"{url}/v1/seeds", headers=headers, timeout=60,
                               json={"kind": "program", "program": "def f(x):\n    return -x", "input": "1",
                                     "buffers": ["abduction"]})
        assert codes == [201, 201, 409] and refused.status_code == 409 and "quota" in refused.json()["detail"]
        assert other.status_code == 201  # the quota is per buffer
        _, submitted = store.list_entries(TaskType.DEDUCTION, limit=1, source=None)
        assert submitted == 2
    finally:
        store.close()


def test_a_program_too_deep_to_check_is_a_forbidden_seed_not_a_500(embedded_api) -> None:
    with embedded_api.client() as client:
        response = client.post("/v1/seeds", json={"kind": "program", "program": DEEP_SUM, "input": "1"})
    assert response.status_code == 422, response.text
    assert (response.json()["problem"], response.json()["status"]) == ("seed_rejected", "forbidden")
    assert "nested too deeply" in response.json()["error"]


@pytest.mark.parametrize(("body", "where"), [
    ('{"kind": "induction", "program": "def f(x):\\n    return x", "inputs": ["1", "2"], "message": "a\\u0000b"}',
     ["body", "message"]),
    ('{"kind": "program", "program": "def f(x):\\n    return x", "input": "\'\\ud800\'"}', ["body", "input"]),
    ('{"kind": "program", "program": "def f(x):\\n    return x", "input": "1", "\\udfff": 1}', ["body", "\\udfff"]),
])
def test_nul_and_lone_surrogates_are_a_422_and_nothing_is_stored(api, body: str, where: list[str]) -> None:
    """Before: a NUL was PostgreSQL's DataError answered as 503 'database unavailable' (SQLite stored it); a lone
    surrogate made the 422 handler itself fail (500). On both stores now: 422, nothing stored."""
    counts = [api.store.count(buffer) for buffer in TaskType]
    with api.client() as client:
        response = post_raw(client, body)
    assert response.status_code == 422, response.text
    issue = response.json()["detail"][0]
    assert issue["type"] == "text_not_storable" and issue["loc"] == where
    assert [api.store.count(buffer) for buffer in TaskType] == counts


def test_error_bodies_do_not_echo_the_request(tmp_path, sandbox) -> None:
    """Before: a 233 KB request got a 1.69 MB reply (each issue carried the whole input)."""
    from services.store import open_store

    store = open_store(f"sqlite:///{tmp_path / 'buffers.sqlite3'}", create=True)
    try:
        with serve(settings_for("echo-test-token"), store, sandbox) as url:
            huge = "x" * 55_000  # four times this: a ~220 KB body, under the 256 KB cap
            bodies = [{"kind": "program", "program": huge, "input": huge, "buffers": [huge], "source": huge},
                      [huge] * 3, {"kind": huge}]
            responses = [httpx.post(f"{url}/v1/seeds", json=body, timeout=60,
                                    headers={"Authorization": "Bearer echo-test-token"}) for body in bodies]
    finally:
        store.close()
    for response in responses:
        assert response.status_code in (413, 422), response.status_code
        assert len(response.content) < 4096 and huge not in response.text
        if response.status_code == 422:
            assert all("input" not in issue for issue in response.json()["detail"])
    assert json.loads(responses[0].text)["problem"] == "invalid_request"
