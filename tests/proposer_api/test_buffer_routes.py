"""The buffer read routes over real HTTP: stats, pagination, filters, one entry, 404s."""

from __future__ import annotations

from services.algorithm.task_types import TaskType
from services.records import RECORD_SCHEMA_VERSION, InductionTask, Triplet, TripletSource


def fill(store, rows, count: int) -> list[str]:
    """Store `count` CRUXEval triplets in D_ded with steps 0..count-1, every third one a seed."""
    ids = []
    for step, row in enumerate(rows[:count]):
        source = TripletSource.SEED if step % 3 == 0 else TripletSource.PROPOSED
        triplet = Triplet(buffer=TaskType.DEDUCTION, program=row["code"], input=row["input"], output=row["output"],
                          source=source, step=step, policy_version=step // 10)
        ids.append(store.insert_triplet(triplet).id)
    return ids


def test_stats_count_each_buffer(embedded_api, cruxeval_rows) -> None:
    fill(embedded_api.store, cruxeval_rows, 12)
    embedded_api.store.insert_induction(InductionTask(program="def f(x):\n    return x", inputs=["1", "2"],
                                                      outputs=["1", "2"], message="identity"))
    with embedded_api.client(token=None) as client:
        stats = {s["buffer"]: s for s in client.get("/v1/buffers").json()}
    assert list(stats) == ["deduction", "abduction", "induction"]
    assert (stats["deduction"]["count"], stats["abduction"]["count"], stats["induction"]["count"]) == (12, 0, 1)
    assert {k: v for k, v in stats["deduction"]["by_source"].items() if v} == {"seed": 4, "proposed": 8}
    assert (stats["deduction"]["min_step"], stats["deduction"]["max_step"]) == (0, 11)


def test_pages_are_bounded_and_cover_the_buffer_once(embedded_api, cruxeval_rows) -> None:
    ids = fill(embedded_api.store, cruxeval_rows, 23)
    seen: list[str] = []
    with embedded_api.client(token=None) as client:
        for offset in range(0, 30, 10):
            page = client.get("/v1/buffers/deduction", params={"limit": 10, "offset": offset}).json()
            assert (page["total"], page["limit"], page["offset"]) == (23, 10, offset)
            seen.extend(entry["id"] for entry in page["entries"])
        assert client.get("/v1/buffers/deduction", params={"limit": 501}).status_code == 422
        assert client.get("/v1/buffers/deduction", params={"offset": -1}).status_code == 422
        assert client.get("/v1/buffers/deduction", params={"limit": 500}).status_code == 200
    assert sorted(seen) == sorted(ids)


def test_filters_by_source_and_min_step(embedded_api, cruxeval_rows) -> None:
    fill(embedded_api.store, cruxeval_rows, 20)
    with embedded_api.client(token=None) as client:
        seeds = client.get("/v1/buffers/deduction", params={"source": "seed", "limit": 100}).json()
        assert seeds["total"] == 7 and {e["source"] for e in seeds["entries"]} == {"seed"}
        late = client.get("/v1/buffers/deduction", params={"min_step": 15, "limit": 100}).json()
        assert late["total"] == 5 and min(e["step"] for e in late["entries"]) == 15
        both = client.get("/v1/buffers/deduction", params={"min_step": 10, "source": "proposed"}).json()
        assert both["total"] == 7
        assert client.get("/v1/buffers/deduction", params={"source": "alien"}).status_code == 422


def test_one_entry_and_404s(embedded_api, cruxeval_rows) -> None:
    (entry_id,) = fill(embedded_api.store, cruxeval_rows, 1)
    with embedded_api.client(token=None) as client:
        entry = client.get(f"/v1/buffers/deduction/{entry_id}")
        assert entry.status_code == 200 and entry.json()["output"] == cruxeval_rows[0]["output"]
        assert entry.json()["schema_version"] == RECORD_SCHEMA_VERSION
        assert client.get(f"/v1/buffers/abduction/{entry_id}").status_code == 404
        unknown = client.get("/v1/buffers/retrieval")
        assert unknown.status_code == 404 and "unknown buffer" in unknown.json()["detail"]
        assert client.get(f"/v1/buffers/retrieval/{entry_id}").status_code == 404
