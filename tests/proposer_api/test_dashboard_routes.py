"""The dashboard's server side over real HTTP on SQLite and PostgreSQL: an entry's solve history, the buffer page's
exact-step filter and text search, and the self-contained page itself (inline parts, CSP nonce, no outside URL)."""

from __future__ import annotations

import re
from typing import Any

from proposer_servers import RunningApi

from proposer_api.schemas import MAX_HISTORY_PAGE, MAX_SEARCH
from services.algorithm.task_types import Role, TaskType
from services.records import Episode, InductionTask, Triplet, TripletSource


def store_rows(store: Any, rows: list[dict[str, str]], count: int) -> list[str]:
    """`count` CRUXEval triplets in D_ded at steps 0, 0, 1, 1, 2, 2, ...; their ids."""
    return [store.insert_triplet(Triplet(buffer=TaskType.DEDUCTION, program=row["code"], input=row["input"],
                                         output=row["output"], step=index // 2, source=TripletSource.PROPOSED)).id
            for index, row in enumerate(rows[:count])]


def attempt(index: int, task_id: str, *, step: int, role: Role = Role.SOLVE, reward: float = 1.0,
            task_type: TaskType = TaskType.DEDUCTION) -> Episode:
    return Episode(id=f"run-d/{step}/{task_type.value}/{role.value}/{index}", run_id="run-d", step=step,
                   task_type=task_type, role=role, prompt_ids=[1, 2], response_ids=[3] * (index + 1),
                   behaviour_logprobs=[-0.1] * (index + 1), reward=reward, policy_version=step, task_id=task_id,
                   text=f"<think>try {index}</think><answer>{index}</answer>",
                   exec_status="ok" if reward > 0 else "wrong")


def test_the_history_of_an_entry_lists_its_solve_attempts_by_step(api: RunningApi, cruxeval_rows) -> None:
    first, second = store_rows(api.store, cruxeval_rows, 2)
    api.store.record_episodes([
        attempt(0, first, step=2, reward=-0.5), attempt(1, first, step=1), attempt(2, first, step=1, role=Role.PROPOSE),
        attempt(3, second, step=1), attempt(4, first, step=3, task_type=TaskType.ABDUCTION),
    ])
    with api.client(token=None) as client:
        history = client.get(f"/v1/buffers/deduction/{first}/history").json()
        assert (history["buffer"], history["entry_id"], history["total"]) == ("deduction", first, 2)
        assert [(a["step"], a["reward"], a["exec_status"]) for a in history["attempts"]] == [(1, 1.0, "ok"),
                                                                                           (2, -0.5, "wrong")]
        latest = history["attempts"][1]
        assert latest == {"episode_id": "run-d/2/deduction/solve/0", "run_id": "run-d", "step": 2, "policy_version": 2,
                          "reward": -0.5, "exec_status": "wrong", "response_tokens": 1,
                          "text": "<think>try 0</think><answer>0</answer>"}
        paged = client.get(f"/v1/buffers/deduction/{first}/history", params={"limit": 1, "offset": 1}).json()
        assert (paged["total"], [a["step"] for a in paged["attempts"]]) == (2, [2])
        assert client.get(f"/v1/buffers/deduction/{second}/history").json()["total"] == 1


def test_history_answers_404_and_422_with_reasons(api: RunningApi, cruxeval_rows) -> None:
    (entry_id,) = store_rows(api.store, cruxeval_rows, 1)
    with api.client(token=None) as client:
        wrong_buffer = client.get(f"/v1/buffers/abduction/{entry_id}/history")
        assert wrong_buffer.status_code == 404
        assert f"no abduction entry with id '{entry_id}'" in wrong_buffer.json()["detail"]
        assert client.get("/v1/buffers/deduction/abc/history").status_code == 404
        unknown = client.get(f"/v1/buffers/retrieval/{entry_id}/history")
        assert unknown.status_code == 404 and "unknown buffer" in unknown.json()["detail"]
        for params in ({"limit": 0}, {"limit": MAX_HISTORY_PAGE + 1}, {"offset": -1}):
            response = client.get(f"/v1/buffers/deduction/{entry_id}/history", params=params)
            assert response.status_code == 422 and response.json()["detail"][0]["loc"][-1] == next(iter(params))


def test_buffer_pages_filter_by_exact_step_and_search_text(api: RunningApi, cruxeval_rows) -> None:
    ids = store_rows(api.store, cruxeval_rows, 12)
    needle_row = cruxeval_rows[7]
    needle = max(re.findall(r"[A-Za-z_]{5,}", needle_row["code"]), key=len)
    expected = {entry_id for entry_id, row in zip(ids, cruxeval_rows)
                if any(needle.lower() in row[field].lower() for field in ("code", "input", "output"))}
    with api.client(token=None) as client:
        at_two = client.get("/v1/buffers/deduction", params={"step": 2}).json()
        assert at_two["total"] == 2 and {e["id"] for e in at_two["entries"]} == set(ids[4:6])
        found = client.get("/v1/buffers/deduction", params={"q": needle.upper(), "limit": 100}).json()
        assert ids[7] in expected and found["total"] == len(expected)
        assert {e["id"] for e in found["entries"]} == expected
        both = client.get("/v1/buffers/deduction", params={"q": needle, "step": 3}).json()
        assert {e["id"] for e in both["entries"]} == expected & set(ids[6:8])
        assert client.get("/v1/buffers/deduction", params={"q": "no program says this"}).json()["total"] == 0
        assert client.get("/v1/buffers/deduction", params={"q": ""}).json()["total"] == 12
        too_long = client.get("/v1/buffers/deduction", params={"q": "x" * (MAX_SEARCH + 1)})
        assert too_long.status_code == 422 and too_long.json()["detail"][0]["loc"][-1] == "q"
        assert client.get("/v1/buffers/deduction", params={"step": -1}).status_code == 422


def test_induction_entries_are_found_by_message_and_pairs(api: RunningApi) -> None:
    task = InductionTask(program="def f(s):\n    return s[::-1]", inputs=["'Kayak'", "'abc'"],
                         outputs=["'kayaK'", "'cba'"], message="Reverse the string")
    entry_id = api.store.insert_induction(task).id
    with api.client(token=None) as client:
        for needle in ("reverse THE", "kayak", "'cba'"):
            page = client.get("/v1/buffers/induction", params={"q": needle}).json()
            assert [e["id"] for e in page["entries"]] == [entry_id], needle


def test_the_dashboard_page_is_self_contained_with_a_fresh_nonce(api: RunningApi) -> None:
    with api.client(token=None) as client:
        first, second = client.get("/dashboard"), client.get("/dashboard")
    assert first.status_code == 200 and first.headers["content-type"].startswith("text/html")
    nonce = re.search(r"script-src 'nonce-([^']+)'", first.headers["content-security-policy"]).group(1)
    assert f'<script nonce="{nonce}">' in first.text and f'<style nonce="{nonce}">' in first.text
    assert nonce not in second.text  # one nonce per response
    assert "connect-src 'self'" in first.headers["content-security-policy"]
    assert "default-src 'none'" in first.headers["content-security-policy"]
    page = first.text
    assert "__AZR_" not in page  # every part was inlined
    assert not re.search(r"""\s(?:src|href)\s*=""", page)  # nothing loaded from anywhere
    assert not re.search(r"""https?://(?!www\.w3\.org/2000/svg)""", page)  # the SVG namespace is a name, not a fetch
    for marker in ('id="charts"', 'id="entries"', 'id="detail"', 'id="run"', "function highlightPython",
                   "function drawCharts", "/v1/runs/"):
        assert marker in page, marker
    assert first.headers["cache-control"] == "no-store"
