"""`azr serve inference` does what its OpenAPI document says (the SGLang subset it serves): schemathesis, every
check, every phase, 0 failures; the tiny model on CPU, an admin key on the control routes, served on loopback."""

from __future__ import annotations

from pathlib import Path

import pytest
from api_contract import assert_no_failures, run_schemathesis
from throwaway_servers import LoopbackServer

from services.inference.local_engine import LocalEngine
from services.inference.sglang_server import create_inference_app

INFERENCE_OPERATIONS = 8
"""/generate, /update_weights_from_disk, /pause_generation, /continue_generation, /model_info, /get_model_info,
/health, /healthz."""


@pytest.mark.slow
def test_the_inference_server_keeps_its_openapi_contract(tiny_dir: Path, tmp_path: Path) -> None:
    engine = LocalEngine(tiny_dir, device="cpu", seed=1)  # its own: a weight update must not touch the shared one
    report_dir = tmp_path / "schemathesis"
    report_dir.mkdir()
    with LoopbackServer(create_inference_app(engine, pause_wait_s=0.5, admin_api_key="contract-key")) as url:
        run = run_schemathesis(url, report_dir, max_examples=25, headers={"Authorization": "Bearer contract-key"})
    assert_no_failures(run, INFERENCE_OPERATIONS)
