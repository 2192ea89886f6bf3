"""The proposer API does what its OpenAPI document says: schemathesis, every check, every phase, 0 failures.

The embedded profile (SQLite file, in-process sandbox) with the tiny model behind `POST /v1/propose`, served by
uvicorn on loopback; the buffers hold Fig 5's zero triplet and one run has a step, so the read routes answer 200 as
well as 404.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from api_contract import assert_no_failures, run_schemathesis
from proposer_servers import serve, settings_for

from executor_svc.executor import Executor

PROPOSER_OPERATIONS = 13
"""/healthz, /readyz, /metrics, /dashboard, four buffer reads, two run reads, seeds, propose, prompt_tokens."""


@pytest.mark.slow
def test_the_proposer_api_keeps_its_openapi_contract(tmp_path: Path, sandbox: Executor) -> None:
    from services.inference.local_engine import LocalEngine
    from services.inference.tiny_model import tiny_model_dir
    from services.store import open_store

    token = f"tok-{uuid.uuid4().hex}"
    store = open_store(f"sqlite:///{tmp_path / 'buffers.sqlite3'}", create=True)
    try:
        store.initialise()
        store.record_step("contract-run", 1, 1, {"step": 1, "reward/mean": 0.5})
        engine = LocalEngine(tiny_model_dir(), device="cpu")
        settings = settings_for(token, max_request_bytes=8192, max_response_tokens=4)
        with serve(settings, store, sandbox, engine=engine) as url:
            report_dir = tmp_path / "schemathesis"
            report_dir.mkdir()
            run = run_schemathesis(url, report_dir, max_examples=25, headers={"Authorization": f"Bearer {token}"})
    finally:
        store.close()
    assert_no_failures(run, PROPOSER_OPERATIONS)
