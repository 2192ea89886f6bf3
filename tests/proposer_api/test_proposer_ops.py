"""Operational routes of proposer_api over real HTTP: health, readiness, Prometheus metrics, OpenAPI."""

from __future__ import annotations

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families
from proposer_servers import serve, settings_for
from throwaway_servers import LoopbackServer

from solver_api.app import create_solver_app


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Prometheus exposition text as {(sample name, sorted labels): value}."""
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def test_health_readiness_and_metrics(embedded_api, cruxeval_rows) -> None:
    row = cruxeval_rows[3]
    with embedded_api.client() as client:
        assert client.get("/healthz").json() == {"status": "alive", "service": "proposer"}
        ready = client.get("/readyz")
        assert ready.status_code == 200 and ready.json()["failures"] == {}
        seed = {"kind": "program", "program": row["code"], "input": row["input"]}
        assert client.post("/v1/seeds", json=seed).status_code == 201
        client.get("/v1/buffers/nope")
        metrics = samples(client.get("/metrics").text)
    assert metrics[("azr_buffer_entries", (("buffer", "deduction"),))] == 1
    assert metrics[("azr_buffer_entries", (("buffer", "induction"),))] == 0
    def labels(route: str, status: str) -> tuple[tuple[str, str], ...]:
        return (("route", route), ("service", "proposer"), ("status", status))

    assert metrics[("azr_http_requests_total", labels("/v1/seeds", "201"))] == 1
    assert metrics[("azr_http_requests_total", labels("/v1/buffers/{buffer}", "404"))] == 1
    assert metrics[("azr_http_request_seconds_count", labels("/v1/seeds", "201"))] == 1


def test_openapi_lists_the_v1_routes_and_their_security(embedded_api) -> None:
    with embedded_api.client(token=None) as client:
        assert client.get("/docs").status_code == 200
        spec = client.get("/openapi.json").json()
    assert {"/v1/buffers", "/v1/buffers/{buffer}", "/v1/buffers/{buffer}/{entry_id}", "/v1/seeds"} <= set(spec["paths"])
    assert "/v1/propose" not in spec["paths"]  # arrives with the self-play issue
    assert spec["paths"]["/v1/seeds"]["post"]["security"] == [{"HTTPBearer": []}]


@pytest.mark.slow
def test_rollout_routes_are_served_when_an_engine_is_given(embedded_api, sandbox, cruxeval_rows) -> None:
    """The self-play routes plug into both apps: the tiny model answers `POST /v1/propose` and `POST /v1/solve`."""
    from services.inference.local_engine import LocalEngine
    from services.inference.tiny_model import tiny_model_dir

    engine = LocalEngine(tiny_model_dir(), device="cpu")
    app_settings = settings_for(embedded_api.token)
    row = cruxeval_rows[5]
    sampling = {"max_new_tokens": 8, "temperature": 1.0, "seed": 1}
    headers = {"Authorization": f"Bearer {embedded_api.token}"}
    with serve(app_settings, embedded_api.store, sandbox, engine=engine) as proposer_url, \
            LoopbackServer(create_solver_app(app_settings.api, app_settings.rollout, sandbox,
                                             engine=engine)) as solver_url:
        references = [{"program": row["code"], "input": row["input"], "output": row["output"]}]
        proposed = httpx.post(f"{proposer_url}/v1/propose", headers=headers, timeout=120,
                              json={"task_type": "deduction", "references": references, "sampling": sampling})
        assert proposed.status_code == 200, proposed.text
        assert len(proposed.json()["proposals"]) == 1 and proposed.json()["weight_version"] == engine.weight_version()
        assert httpx.post(f"{proposer_url}/v1/propose", json={"task_type": "deduction"}).status_code == 401
        task = {"program": row["code"], "input": row["input"], "output": row["output"]}
        solved = httpx.post(f"{solver_url}/v1/solve", headers=headers, timeout=120,
                            json={"task_type": "deduction", "tasks": [task], "sampling": sampling, "check": True})
        assert solved.status_code == 200, solved.text
        (solution,) = solved.json()["solutions"][0]
        assert solution["checked"] is True
