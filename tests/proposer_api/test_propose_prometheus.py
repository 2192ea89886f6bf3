"""`POST /v1/propose` counts its proposals by task type and parse outcome, in the proposer's own `/metrics`."""

from __future__ import annotations

from collections import Counter

import httpx
import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_scrape import labelled, parse_exposition, scrape
from proposer_servers import serve, settings_for

from proposer_api.prometheus_metrics import FORMAT_ERROR, PARSED, ProposerMetrics
from services.algorithm.task_types import TaskType
from services.ports import Completion, ProposeContext
from services.rollouts.proposing import proposal_record


@pytest.mark.slow
def test_propose_route_counts_each_proposal_by_outcome(embedded_api, sandbox, cruxeval_rows) -> None:
    """The tiny (random) model answers; the counter must match the parse outcome of every proposal it returned."""
    from services.inference.local_engine import LocalEngine
    from services.inference.tiny_model import tiny_model_dir

    engine = LocalEngine(tiny_model_dir(), device="cpu")
    row = cruxeval_rows[5]
    references = [{"program": row["code"], "input": row["input"], "output": row["output"]}]
    sampling = {"max_new_tokens": 8, "temperature": 1.0, "seed": 1}
    headers = {"Authorization": f"Bearer {embedded_api.token}"}
    expected: Counter[tuple[str, str]] = Counter()
    with serve(settings_for(embedded_api.token), embedded_api.store, sandbox, engine=engine) as url:
        for task_type, count in (("deduction", 3), ("abduction", 2)):
            response = httpx.post(f"{url}/v1/propose", headers=headers, timeout=120,
                                  json={"task_type": task_type, "count": count, "references": references,
                                        "sampling": sampling})
            assert response.status_code == 200, response.text
            proposals = response.json()["proposals"]
            assert len(proposals) == count
            expected.update((task_type, p["parse_failure"] if p["task"] is None else PARSED if p["format_ok"]
                             else FORMAT_ERROR) for p in proposals)
        assert httpx.post(f"{url}/v1/propose", json={"task_type": "deduction"}).status_code == 401
        samples = scrape(f"{url}/metrics")
    counted = {(dict(labels)["task_type"], dict(labels)["outcome"]): v
               for labels, v in labelled(samples, "azr_proposer_proposals_total").items()}
    assert counted == dict(expected) and sum(counted.values()) == 5
    assert samples[("azr_http_requests_total", (("route", "/v1/propose"), ("service", "proposer"),
                                                ("status", "200")))] == 2


def test_a_well_formed_proposal_counts_as_parsed() -> None:
    """The outcome is taken from the real parser's verdict on each completion."""
    registry = CollectorRegistry()
    metrics = ProposerMetrics(registry)
    context = ProposeContext([])
    good = "<think>ok</think>\n<answer>\n```python\ndef f(x):\n    return x + 1\n```\n```input\n2\n```\n</answer>"
    proposals = [proposal_record(TaskType.DEDUCTION, [1], Completion(prompt_index=0, text=text, output_ids=[1],
                                                                     logprobs=[-0.1], finish_reason="stop",
                                                                     weight_version="0"), context, 10)
                 for text in (good, "no template at all", good.replace("</think>\n", "</think> Sure! "))]
    assert proposals[0].task is not None and proposals[1].parse_failure == "missing_code_block"
    assert proposals[2].task is not None and proposals[2].format_failure == "malformed_tags"
    metrics.observe(proposals)
    samples = parse_exposition(generate_latest(registry).decode())
    assert labelled(samples, "azr_proposer_proposals_total") == {
        (("outcome", "parsed"), ("task_type", "deduction")): 1,
        (("outcome", "missing_code_block"), ("task_type", "deduction")): 1,
        (("outcome", "format_error"), ("task_type", "deduction")): 1,
    }
