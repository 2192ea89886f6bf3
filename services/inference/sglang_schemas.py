"""SGLang's native HTTP JSON shapes (sglang 0.5.x, docs/design.md §6), the subset we send, serve and read.

One module for both sides, so `SGLangClient` and `azr serve inference` cannot drift apart. Field names are SGLang's
(`python/sglang/srt/managers/io_struct.py` GenerateReqInput / UpdateWeightFromDiskReqInput,
`python/sglang/srt/sampling/sampling_params.py` SamplingParams); the version that identifies the weights on the
wire is SGLang's `weight_version` (our policy version, as a string).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictFloat, field_validator

from services.json_types import JsonInt, TokenId
from services.ports import SamplingParams

SGLANG_SAMPLING_FIELDS = frozenset({
    "max_new_tokens", "stop", "stop_token_ids", "stop_regex", "temperature", "top_p", "top_k", "min_p",
    "frequency_penalty", "presence_penalty", "repetition_penalty", "min_new_tokens", "n", "json_schema", "regex",
    "ebnf", "structural_tag", "ignore_eos", "skip_special_tokens", "spaces_between_special_tokens", "no_stop_trim",
    "custom_params", "stream_interval", "logit_bias", "sampling_seed",
})
"""API fields of SGLang's SamplingParams (sgl-project/sglang, python/sglang/srt/sampling/sampling_params.py, read
at commit 00c17cafcb9e, the 0.5.2x line). SGLang rejects any other key with 400."""


class WireSamplingParams(BaseModel):
    """`sampling_params` of `POST /generate`: the SGLang fields this project uses; any other key is refused."""

    model_config = ConfigDict(extra="forbid")

    max_new_tokens: JsonInt = Field(128, ge=1)
    temperature: StrictFloat = Field(1.0, ge=0)
    top_p: StrictFloat = Field(1.0, gt=0, le=1)
    top_k: JsonInt = Field(-1, description="-1 (disabled) or at least 1",
                           json_schema_extra={"anyOf": [{"const": -1}, {"minimum": 1}]})
    n: JsonInt = Field(1, ge=1)
    stop: str | list[str] | None = None
    sampling_seed: JsonInt | None = None

    @field_validator("top_k")
    @classmethod
    def _top_k_range(cls, value: int) -> int:
        if value != -1 and value < 1:
            raise ValueError("top_k must be -1 (disabled) or at least 1")
        return value

    @classmethod
    def from_port(cls, sampling: SamplingParams) -> WireSamplingParams:
        """The wire form of the port's SamplingParams (`seed` travels as `sampling_seed`)."""
        return cls(max_new_tokens=sampling.max_new_tokens, temperature=sampling.temperature, top_p=sampling.top_p,
                   top_k=sampling.top_k, n=sampling.n, stop=list(sampling.stop) or None, sampling_seed=sampling.seed)

    def to_port(self) -> SamplingParams:
        """The port's SamplingParams for the local engine."""
        stop = [self.stop] if isinstance(self.stop, str) else list(self.stop or [])
        return SamplingParams(max_new_tokens=self.max_new_tokens, temperature=self.temperature, top_p=self.top_p,
                              top_k=self.top_k, n=self.n, stop=stop, seed=self.sampling_seed)


class GenerateRequest(BaseModel):
    """`POST /generate` body: exactly one of `text` or `input_ids`, single or batch; `sampling_params` one object for
    every prompt or one per prompt. Unknown top-level keys are ignored, as SGLang does; an unknown or unsupported
    `sampling_params` key is an error."""

    model_config = ConfigDict(extra="ignore")

    text: str | list[str] | None = None
    input_ids: list[TokenId] | list[list[TokenId]] | None = None  # the server refuses ids >= its vocabulary too
    sampling_params: WireSamplingParams | list[WireSamplingParams] | None = None
    return_logprob: StrictBool = False
    rid: str | list[str] | None = None
    stream: Literal[False] = Field(False, description="Must be false: this server does not stream.")

    @field_validator("sampling_params", mode="before")
    @classmethod
    def _only_supported_fields(cls, value: object) -> object:
        """Name the SGLang fields this server does not implement (any other unknown key is refused as extra)."""
        for params in value if isinstance(value, list) else [value]:
            if isinstance(params, dict):
                unsupported = sorted(set(params) & (SGLANG_SAMPLING_FIELDS - set(WireSamplingParams.model_fields)))
                if unsupported:
                    raise ValueError(f"sampling_params fields not supported by this server: {unsupported}")
        return value


class FinishReason(BaseModel):
    """`meta_info.finish_reason`: stop (EOS id or stop string in `matched`), length, or abort (retry it)."""

    type: Literal["stop", "length", "abort"]
    matched: int | str | None = None
    length: int | None = None
    message: str | None = None


class MetaInfo(BaseModel):
    """`meta_info` of one generated item (the keys the client reads; SGLang sends more)."""

    model_config = ConfigDict(extra="allow")

    id: str = ""
    finish_reason: FinishReason
    prompt_tokens: int
    completion_tokens: int
    weight_version: str = "default"
    output_token_logprobs: list[tuple[float, int, str | None]] | None = None


class GenerateItem(BaseModel):
    """One element of the `/generate` response list: batch order, each prompt's n samples consecutive."""

    model_config = ConfigDict(extra="allow")

    text: str
    output_ids: list[int]
    meta_info: MetaInfo


class UpdateWeightsFromDiskRequest(BaseModel):
    """`POST /update_weights_from_disk` body (unknown keys ignored, as SGLang's control endpoints do)."""

    model_config = ConfigDict(extra="ignore")

    model_path: str = Field(min_length=1)
    weight_version: str | None = None
    abort_all_requests: StrictBool = False


class UpdateWeightsFromDiskResponse(BaseModel):
    """Its answer: HTTP 200 with success true, or 400 with success false and the reason."""

    success: bool
    message: str
    num_paused_requests: int = 0


class PauseGenerationRequest(BaseModel):
    """`POST /pause_generation` body."""

    model_config = ConfigDict(extra="ignore")

    mode: Literal["abort", "retract", "in_place"] = "abort"


class ContinueGenerationRequest(BaseModel):
    """`POST /continue_generation` body (`{}`; it must be present)."""

    model_config = ConfigDict(extra="ignore")


class ModelInfoResponse(BaseModel):
    """`GET /model_info`: what SGLang reports, plus how prompts are formed for this model."""

    model_path: str
    tokenizer_path: str
    is_generation: bool = True
    weight_version: str
    prompt_form: str | None = None


class ServerError(BaseModel):
    """SGLang's error body: 400 (malformed request), 401 (no admin key), 500 (the engine failed), 503 (paused)."""

    object: Literal["error"]
    message: str
    type: str
    code: int


class ControlResponse(BaseModel):
    """`POST /pause_generation` and `POST /continue_generation`: done."""

    message: str
    status: Literal["ok"]


class HealthResponse(BaseModel):
    """`GET /health` (a one-token generation succeeded) and `GET /healthz` (the process answers)."""

    status: Literal["ok"]
