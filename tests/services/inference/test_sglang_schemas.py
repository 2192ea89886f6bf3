"""Our SGLang JSON held to SGLang's own definitions (copied below with where they came from)."""

from __future__ import annotations

from services.inference.sglang_schemas import (
    SGLANG_SAMPLING_FIELDS,
    GenerateItem,
    UpdateWeightsFromDiskRequest,
    WireSamplingParams,
)
from services.ports import SamplingParams

# sgl-project/sglang python/sglang/srt/sampling/sampling_params.py, class SamplingParams, the "API parameters"
# block, read at commit 00c17cafcb9e (0.5.2x line). Copied by hand on purpose: the test fails if our module's
# copy (SGLANG_SAMPLING_FIELDS) or what we send drifts from SGLang's.
SGLANG_SAMPLING_PARAMS_API_FIELDS = {
    "max_new_tokens", "stop", "stop_token_ids", "stop_regex", "temperature", "top_p", "top_k", "min_p",
    "frequency_penalty", "presence_penalty", "repetition_penalty", "min_new_tokens", "n", "json_schema", "regex",
    "ebnf", "structural_tag", "ignore_eos", "skip_special_tokens", "spaces_between_special_tokens", "no_stop_trim",
    "custom_params", "stream_interval", "logit_bias", "sampling_seed",
}

# sgl-project/sglang python/sglang/srt/managers/io_struct.py, GenerateReqInput: the fields we send or accept
# (the class has many more; unknown top-level keys are ignored by SGLang).
SGLANG_GENERATE_REQ_FIELDS_WE_USE = {"text", "input_ids", "sampling_params", "return_logprob", "rid", "stream"}

# A real /generate response from SGLang's CI docs run (2026-03-03: its native-API documentation page), with
# return_logprob's meta_info.output_token_logprobs ([logprob, token_id, text-or-null]) added as that page shows them.
REAL_SGLANG_ITEM = {
    "text": "  Berne\n\nTo determine",
    "output_ids": [220, 8907, 811],
    "meta_info": {
        "id": "93fff4f1dfd3496eb1f725361d64333b",
        "finish_reason": {"type": "length", "length": 3},
        "prompt_tokens": 7,
        "weight_version": "default",
        "total_retractions": 0,
        "completion_tokens": 3,
        "cached_tokens": 0,
        "cached_tokens_details": None,
        "dp_rank": None,
        "e2e_latency": 0.27121597435325384,
        "response_sent_to_client_ts": 1772580196.322954,
        "output_token_logprobs": [[-0.5, 220, None], [-1.25, 8907, None], [-0.125, 811, None]],
    },
}


def test_sampling_keys_we_send_are_sglang_fields() -> None:
    sent = WireSamplingParams.from_port(SamplingParams(max_new_tokens=9, temperature=0.7, top_p=0.9, top_k=20, n=3,
                                                       stop=["</answer>"], seed=5)).model_dump(exclude_none=True)
    assert set(sent) <= SGLANG_SAMPLING_PARAMS_API_FIELDS
    assert sent["sampling_seed"] == 5 and sent["max_new_tokens"] == 9 and "max_tokens" not in sent
    assert set(WireSamplingParams.model_fields) <= SGLANG_SAMPLING_PARAMS_API_FIELDS
    assert SGLANG_SAMPLING_FIELDS == SGLANG_SAMPLING_PARAMS_API_FIELDS


def test_generate_request_fields_are_sglang_fields() -> None:
    from services.inference.sglang_schemas import GenerateRequest

    assert set(GenerateRequest.model_fields) <= SGLANG_GENERATE_REQ_FIELDS_WE_USE
    assert set(UpdateWeightsFromDiskRequest.model_fields) <= {"model_path", "weight_version", "abort_all_requests",
                                                              "load_format", "flush_cache"}


def test_client_reads_a_real_sglang_response() -> None:
    item = GenerateItem.model_validate(REAL_SGLANG_ITEM)
    assert item.meta_info.finish_reason.type == "length"
    assert item.meta_info.weight_version == "default"
    assert [token for _, token, _ in item.meta_info.output_token_logprobs or []] == item.output_ids


def test_wire_params_round_trip_to_the_port() -> None:
    port = SamplingParams(max_new_tokens=4, temperature=0, n=2, stop=["x"], seed=3)
    assert WireSamplingParams.from_port(port).to_port() == port
    assert WireSamplingParams(stop="y").to_port().stop == ["y"]
