"""What the proposer's OpenAPI document promises a generated client, read from the served document (the fuzzing
itself: test_proposer_openapi_contract.py): every status with its body, `/metrics` as text, two distinct 422s."""

from __future__ import annotations

import httpx


def test_every_route_documents_its_statuses_with_bodies(embedded_api) -> None:
    paths = httpx.get(f"{embedded_api.url}/openapi.json").json()["paths"]
    documented = {(path, method): set(operation["responses"]) for path, item in paths.items()
                  for method, operation in item.items()}
    assert documented[("/v1/seeds", "post")] == {"200", "201", "400", "401", "403", "409", "413", "422", "503",
                                                  "504"}
    for read in ("/v1/buffers/{buffer}", "/v1/buffers/{buffer}/{entry_id}", "/v1/buffers/{buffer}/{entry_id}/history",
                 "/v1/runs/{run_id}/steps"):
        assert {"200", "404", "422", "503"} <= documented[(read, "get")], read
    assert documented[("/readyz", "get")] == {"200", "503"}
    for (path, method), statuses in documented.items():
        for status in statuses - {"200", "201"}:
            content = paths[path][method]["responses"][status]["content"]
            assert list(content) == ["application/json"] and content["application/json"]["schema"], (path, status)


def test_metrics_are_documented_as_prometheus_text(embedded_api) -> None:
    metrics = httpx.get(f"{embedded_api.url}/openapi.json").json()["paths"]["/metrics"]["get"]["responses"]["200"]
    assert list(metrics["content"]) == ["text/plain"]
    assert httpx.get(f"{embedded_api.url}/metrics").headers["content-type"].startswith("text/plain")


def test_the_two_422s_of_seeds_are_told_apart_by_problem(embedded_api) -> None:
    schema = httpx.get(f"{embedded_api.url}/openapi.json").json()["paths"]["/v1/seeds"]["post"]["responses"]["422"]
    body = schema["content"]["application/json"]["schema"]
    assert body["discriminator"]["propertyName"] == "problem"
    assert set(body["discriminator"]["mapping"]) == {"invalid_request", "seed_rejected"}
    with embedded_api.client() as client:
        malformed = client.post("/v1/seeds", json={"kind": "program", "program": "def f(x):\n    return x"})
        rejected = client.post("/v1/seeds", json={"kind": "program", "program": "def f(x):\n    return x[5]",
                                                  "input": "[1]"})
    assert malformed.status_code == rejected.status_code == 422
    assert malformed.json()["problem"] == "invalid_request" and malformed.json()["detail"][0]["loc"][-1] == "input"
    assert rejected.json()["problem"] == "seed_rejected" and rejected.json()["status"] == "runtime_error"
