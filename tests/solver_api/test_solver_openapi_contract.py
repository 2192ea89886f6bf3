"""The solver API does what its OpenAPI document says: schemathesis, every check, every phase, 0 failures.

The tiny model behind `POST /v1/solve` and the in-process sandbox judging `check: true`, served by uvicorn on loopback.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from api_contract import assert_no_failures, run_schemathesis
from pydantic import SecretStr
from throwaway_servers import LoopbackServer

from executor_svc.executor import Executor
from services.execution import ExecutionLimits
from services.settings import Settings
from solver_api.app import create_solver_app

SOLVER_OPERATIONS = 4
"""/healthz, /readyz, /metrics, /v1/solve."""


@pytest.mark.slow
def test_the_solver_api_keeps_its_openapi_contract(tmp_path: Path) -> None:
    from services.inference.local_engine import LocalEngine
    from services.inference.tiny_model import tiny_model_dir

    token = f"tok-{uuid.uuid4().hex}"
    settings = Settings(api_token=SecretStr(token), max_request_bytes=8192, max_response_tokens=4)
    engine = LocalEngine(tiny_model_dir(), device="cpu")
    report_dir = tmp_path / "schemathesis"
    report_dir.mkdir()
    with Executor(workers=2, limits=ExecutionLimits(timeout_s=3)) as sandbox, \
            LoopbackServer(create_solver_app(settings.api, settings.rollout, sandbox, engine=engine)) as url:
        run = run_schemathesis(url, report_dir, max_examples=25, headers={"Authorization": f"Bearer {token}"})
    assert_no_failures(run, SOLVER_OPERATIONS)
