"""The run log's read routes over real HTTP on SQLite and PostgreSQL: run list, steps, incremental polling, 404/422."""

from __future__ import annotations

from typing import Any

from proposer_servers import RunningApi

from proposer_api.schemas import MAX_STEPS_PAGE


def metrics_line(step: int) -> dict[str, Any]:
    return {"step": step, "reward/deduction/solve": step / 10, "buffer/deduction": 10 + step, "time/total": 1.5}


def test_runs_are_listed_with_their_progress_newest_activity_first(api: RunningApi) -> None:
    with api.client(token=None) as client:
        assert client.get("/v1/runs").json() == {"schema_version": 1, "runs": []}
        api.store.record_step("run-old", 1, 0, metrics_line(1))
        api.store.record_step("run-old", 2, 1, metrics_line(2))
        api.store.ensure_run("run-new", {"batch_size": 4})
        runs = client.get("/v1/runs").json()["runs"]
    assert [run["run_id"] for run in runs] == ["run-new", "run-old"]
    assert {key: runs[1][key] for key in ("steps", "first_step", "last_step")} == {"steps": 2, "first_step": 1,
                                                                                   "last_step": 2}
    assert runs[1]["last_recorded_at"] is not None and runs[0]["last_recorded_at"] is None


def test_steps_come_in_order_and_polling_since_a_step_returns_only_newer_ones(api: RunningApi) -> None:
    for step in (3, 1, 2):
        api.store.record_step("run-p", step, step - 1, metrics_line(step))
    with api.client(token=None) as client:
        page = client.get("/v1/runs/run-p/steps").json()
        assert (page["run_id"], page["since_step"], page["has_more"]) == ("run-p", None, False)
        assert [(s["step"], s["policy_version"]) for s in page["steps"]] == [(1, 0), (2, 1), (3, 2)]
        assert page["steps"][1]["metrics"] == metrics_line(2)
        assert client.get("/v1/runs/run-p/steps", params={"since_step": 3}).json()["steps"] == []
        api.store.record_step("run-p", 4, 3, metrics_line(4))
        newer = client.get("/v1/runs/run-p/steps", params={"since_step": 3}).json()
        assert [s["step"] for s in newer["steps"]] == [4] and newer["steps"][0]["metrics"]["buffer/deduction"] == 14
        assert [s["step"] for s in client.get("/v1/runs/run-p/steps", params={"since_step": -1}).json()["steps"]] == [
            1, 2, 3, 4]


def test_limited_pages_cover_every_step_once(api: RunningApi) -> None:
    for step in range(10):
        api.store.record_step("run-l", step, 0, metrics_line(step))
    seen: list[int] = []
    since: int | None = None
    with api.client(token=None) as client:
        for _ in range(10):
            params: dict[str, int] = {"limit": 4} if since is None else {"limit": 4, "since_step": since}
            page = client.get("/v1/runs/run-l/steps", params=params).json()
            seen.extend(s["step"] for s in page["steps"])
            since = seen[-1]
            if not page["has_more"]:
                break
    assert seen == list(range(10))


def test_unknown_runs_are_404_and_bad_parameters_422(api: RunningApi) -> None:
    api.store.ensure_run("run-empty", {})
    with api.client(token=None) as client:
        empty = client.get("/v1/runs/run-empty/steps")
        assert empty.status_code == 200 and empty.json()["steps"] == []
        missing = client.get("/v1/runs/nobody/steps")
        assert missing.status_code == 404 and "no run 'nobody'" in missing.json()["detail"]
        for params in ({"since_step": -2}, {"since_step": "abc"}, {"limit": 0}, {"limit": MAX_STEPS_PAGE + 1}):
            response = client.get("/v1/runs/run-empty/steps", params=params)
            assert response.status_code == 422, params
            assert response.json()["detail"][0]["loc"][-1] == next(iter(params))
        assert client.get(f"/v1/runs/{'r' * 65}/steps").status_code == 422
