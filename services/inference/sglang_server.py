"""`azr serve inference`: an HTTP server speaking SGLang's native wire format (the docs/design.md §6 subset) over the
local transformers engine.

It lets the distributed profile run where SGLang cannot (CPU machines) and is what `SGLangClient` is tested against
over real HTTP. Routes: `POST /generate`, `POST /update_weights_from_disk`, `POST /pause_generation`,
`POST /continue_generation`, `GET /model_info` (alias `/get_model_info`), `GET /health` (runs a one-token
generation; 503 while paused or updating), `GET /healthz` (alive). Malformed requests get 400 with SGLang's error
shape `{"object": "error", "message", "type": "BadRequest", "code": 400}` (`ServerError`); the OpenAPI document
states each route's statuses with their bodies.

Admin key (SGLang's `--admin-api-key`; here `admin_api_key`, from AZR_SGLANG_ADMIN_API_KEY): when set, the control
endpoints (`/pause_generation`, `/update_weights_from_disk`, `/continue_generation`) answer 401 unless the request
carries `Authorization: Bearer <key>`; `/generate`, `/model_info` and the health routes stay open, as in SGLang.

Limits: no streaming, no constrained decoding, one batch at a time (the engine's lock serialises requests; SGLang
would batch them continuously).
"""

from __future__ import annotations

import hmac
import uuid
from collections.abc import Mapping, Sequence
from http import HTTPStatus

from fastapi import Depends, FastAPI, Request, params
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from starlette.exceptions import HTTPException as StarletteHTTPException

from services.inference.decoding import RawSample
from services.inference.engine_choice import InProcessEngine
from services.inference.generation_gate import GateClosed, GenerationGate
from services.inference.sampling import sample_seeds
from services.inference.sglang_schemas import (
    ContinueGenerationRequest,
    ControlResponse,
    FinishReason,
    GenerateItem,
    GenerateRequest,
    HealthResponse,
    MetaInfo,
    ModelInfoResponse,
    PauseGenerationRequest,
    ServerError,
    UpdateWeightsFromDiskRequest,
    UpdateWeightsFromDiskResponse,
    WireSamplingParams,
)
from services.json_types import JsonObject
from services.ports import InferenceError, SamplingParams

HEALTH_SAMPLING = SamplingParams(max_new_tokens=1, temperature=0)


class BadRequest(ValueError):
    """A request the server refuses with 400 and this message."""


def _documented(*statuses: int, **descriptions: str) -> dict[int | str, JsonObject]:
    """`responses=` entries: each status with the `ServerError` body (descriptions by `s<status>`)."""
    defaults = {400: "Malformed request.", 401: "No admin key (`Authorization: Bearer <admin_api_key>`).",
                500: "The engine failed.",
                503: "Generation is paused, weights are being updated, or the server is shutting down."}
    return {status: {"model": ServerError, "description": descriptions.get(f"s{status}", defaults[status])}
            for status in statuses}


def error_response(message: str, status: int = 400, headers: Mapping[str, str] | None = None) -> JSONResponse:
    """SGLang's error body (`type`: the status phrase, as `BadRequest`, `Unauthorized`, `ServiceUnavailable`)."""
    kind = HTTPStatus(status).phrase.replace(" ", "")
    return JSONResponse({"object": "error", "message": message, "type": kind, "code": status}, status_code=status,
                        headers=headers)


def prompt_batch(request: GenerateRequest, engine: InProcessEngine) -> tuple[list[list[int]], bool]:
    """Token ids of every prompt and whether the request was a batch (the response is then a list)."""
    if (request.text is None) == (request.input_ids is None):
        raise BadRequest("give exactly one of `text` or `input_ids`")
    if request.text is not None:
        texts = [request.text] if isinstance(request.text, str) else request.text
        prompts, batched = [engine.codec.encode(text) for text in texts], isinstance(request.text, list)
    else:
        ids = request.input_ids or []
        batched = bool(ids) and isinstance(ids[0], list)
        prompts = [list(p) for p in ids] if batched else [list(ids)]  # type: ignore[arg-type]  # batched: list of lists
    if not prompts or any(len(p) == 0 for p in prompts):
        raise BadRequest("every prompt needs at least one token")
    vocab = engine.vocab_size
    if any(not 0 <= token < vocab for prompt in prompts for token in prompt):
        raise BadRequest(f"input_ids must lie in [0, {vocab})")
    return prompts, batched


def items_of(samples: Sequence[RawSample], prompt_len: int, version: str, logprobs: bool) -> list[dict[str, object]]:
    """Wire items for one prompt's samples."""
    items = []
    for sample in samples:
        finish = FinishReason(type=sample.finish_reason, matched=sample.matched if sample.finish_reason == "stop"
                              else None, length=len(sample.output_ids) if sample.finish_reason == "length" else None,
                              message="Aborted by pause_generation." if sample.finish_reason == "abort" else None)
        meta = MetaInfo(id=uuid.uuid4().hex, finish_reason=finish, prompt_tokens=prompt_len,
                        completion_tokens=len(sample.output_ids), weight_version=version,
                        output_token_logprobs=[(lp, tok, None) for lp, tok in zip(sample.logprobs, sample.output_ids)]
                        if logprobs else None)
        items.append(GenerateItem(text=sample.text, output_ids=sample.output_ids, meta_info=meta
                                  ).model_dump(exclude_none=True))
    return items


class AdminKeyRefused(Exception):
    """A control endpoint was called without the admin key the server was started with."""


def admin_guard(admin_api_key: str | None):  # noqa: ANN201 - a FastAPI dependency
    """A dependency that refuses a request (401) unless it carries `Authorization: Bearer <admin_api_key>`; lets
    everything through when the server has no key."""
    if not admin_api_key:
        def open_route() -> None:
            return None

        return open_route
    expected = f"Bearer {admin_api_key}".encode()
    scheme = HTTPBearer(auto_error=False, description="the server's admin_api_key")  # documents it in OpenAPI

    def check(request: Request, _credentials: HTTPAuthorizationCredentials | None = Depends(scheme)) -> None:
        given = request.headers.get("authorization", "").encode()
        if not hmac.compare_digest(given, expected):
            raise AdminKeyRefused()

    return check


def create_inference_app(engine: InProcessEngine, pause_wait_s: float | None = None,
                         admin_api_key: str | None = None) -> FastAPI:
    """The FastAPI app over `engine`. `pause_wait_s`: how long a generation waits while paused (None: forever);
    `admin_api_key`: required on the control endpoints when set (None or empty: open, as SGLang without the flag)."""
    app = FastAPI(title="azr inference (SGLang wire format)", version="1")
    gate = GenerationGate()
    app.state.engine, app.state.gate = engine, gate
    admin = [Depends(admin_guard(admin_api_key))]
    refused = _documented(400, 401) if admin_api_key else _documented(400)

    _add_error_handlers(app)
    _add_generate_route(app, engine, gate, pause_wait_s)
    _add_control_routes(app, engine, gate, admin, refused)
    _add_info_routes(app, engine, gate)
    return app


def _add_error_handlers(app: FastAPI) -> None:
    """Every refusal in SGLang's error shape."""
    @app.exception_handler(AdminKeyRefused)
    async def _refused(_: Request, __: AdminKeyRefused) -> JSONResponse:
        return JSONResponse({"object": "error", "message": "Unauthorized: this endpoint needs the admin API key",
                             "type": "Unauthorized", "code": 401}, status_code=401)

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(_: Request, exc: StarletteHTTPException) -> JSONResponse:
        """FastAPI's own refusals (a body that is not UTF-8, an unknown route) in SGLang's error shape too."""
        return error_response(str(exc.detail), exc.status_code, exc.headers)  # a 405 keeps its Allow header

    @app.exception_handler(RequestValidationError)
    async def _invalid(_: Request, exc: RequestValidationError) -> JSONResponse:
        return error_response(f"invalid request: {exc.errors()}")

    @app.exception_handler(BadRequest)
    async def _bad(_: Request, exc: BadRequest) -> JSONResponse:
        return error_response(str(exc))


def _add_generate_route(app: FastAPI, engine: InProcessEngine, gate: GenerationGate, pause_wait_s: float | None
                        ) -> None:
    """`POST /generate`."""
    @app.post("/generate", response_model=GenerateItem | list[GenerateItem], responses={
        **_documented(400, 500, 503, s400=(
            "Malformed request, or one this server refuses: not exactly one of text or input_ids, an empty prompt, "
            "a token id outside the vocabulary, sampling_params not one per prompt.")),
        200: {"description": "One item for a single prompt with n = 1, else the list (batch order, each prompt's n "
                             "samples together)."}})
    def generate(request: GenerateRequest) -> JSONResponse:
        """Sample completions: one item per prompt per sample, batch order, each prompt's n samples together."""
        prompts, batched = prompt_batch(request, engine)
        raw = request.sampling_params
        params = raw if isinstance(raw, list) else [raw or WireSamplingParams()] * len(prompts)
        if len(params) != len(prompts):
            raise BadRequest(f"{len(params)} sampling_params for {len(prompts)} prompts")
        items: list[dict[str, object]] = []
        try:
            with gate.generation(pause_wait_s) as abort:
                # Prompts whose sampling params differ only in their seed are decoded as one batch, each sample
                # drawing from its own seed (sampling_seed + j for the j-th of its n samples).
                groups: dict[str, list[int]] = {}
                for index, param in enumerate(params):
                    groups.setdefault(param.model_dump_json(exclude={"sampling_seed"}), []).append(index)
                by_prompt: dict[int, list[dict[str, object]]] = {}
                for indices in groups.values():
                    first = params[indices[0]]
                    seeds = [seed for i in indices for seed in sample_seeds(params[i].sampling_seed, 1, first.n)]
                    samples, version = engine.sample([prompts[i] for i in indices], first.to_port(), abort=abort,
                                                     seeds=seeds)
                    for i, prompt_samples in zip(indices, samples):
                        by_prompt[i] = items_of(prompt_samples, len(prompts[i]), version, request.return_logprob)
                items = [item for i in range(len(prompts)) for item in by_prompt[i]]
        except TimeoutError:
            return error_response("generation is paused (waiting for /continue_generation)", 503)
        except GateClosed as exc:
            return error_response(str(exc), 503)
        except InferenceError as exc:
            return error_response(str(exc), 500)
        if batched or params[0].n > 1:
            return JSONResponse(items)
        return JSONResponse(items[0])


def _add_control_routes(app: FastAPI, engine: InProcessEngine, gate: GenerationGate, admin: list[params.Depends],
                        refused: dict[int | str, JsonObject]) -> None:
    """The admin endpoints: new weights from disk, pause and continue."""
    @app.post("/update_weights_from_disk", dependencies=admin, response_model=UpdateWeightsFromDiskResponse,
              responses={**refused, 400: {
                  "model": ServerError | UpdateWeightsFromDiskResponse,
                  "description": "Malformed request (`ServerError`), or the checkpoint could not be loaded "
                                 "(`success: false` and why; the served weights are unchanged)."}})
    def update_weights_from_disk(request: UpdateWeightsFromDiskRequest) -> JSONResponse:
        """Load a checkpoint directory and serve it as `weight_version` (400 with success false on failure)."""
        drained = request.abort_all_requests and not gate.paused
        paused_requests = gate.pause("abort") if drained else 0
        try:
            with gate.updating():
                version = request.weight_version if request.weight_version is not None else engine.weight_version()
                # SGLang names a version by any string; the engine serves str(policy_version)
                engine.update_weights(request.model_path, version)  # type: ignore[arg-type]
        except InferenceError as exc:
            body = UpdateWeightsFromDiskResponse(success=False, message=f"Failed to update weights: {exc}",
                                                 num_paused_requests=paused_requests)
            return JSONResponse(body.model_dump(), status_code=400)
        finally:
            if drained:
                gate.resume()
        message = f"Succeeded to update model weights. Weight version updated to {engine.weight_version()}."
        return JSONResponse(UpdateWeightsFromDiskResponse(success=True, message=message,
                                                          num_paused_requests=paused_requests).model_dump())

    @app.post("/pause_generation", dependencies=admin, response_model=ControlResponse, responses=refused)
    def pause_generation(request: PauseGenerationRequest) -> ControlResponse:
        """Hold new generations; `abort` mode also aborts running ones (they return finish_reason abort)."""
        gate.pause(request.mode)
        return ControlResponse(message="Generation paused successfully.", status="ok")

    @app.post("/continue_generation", dependencies=admin, response_model=ControlResponse, responses=refused)
    def continue_generation(_: ContinueGenerationRequest) -> ControlResponse:
        """Let generations run again."""
        gate.resume()
        return ControlResponse(message="Generation continued successfully.", status="ok")


def _add_info_routes(app: FastAPI, engine: InProcessEngine, gate: GenerationGate) -> None:
    """The model's info, readiness and liveness."""
    @app.get("/model_info", response_model=ModelInfoResponse)
    @app.get("/get_model_info", response_model=ModelInfoResponse)
    def model_info() -> ModelInfoResponse:
        """The served model and its weight version."""
        info = engine.model_info()
        return ModelInfoResponse(model_path=str(info["model_path"]), tokenizer_path=str(engine.model_dir),
                                 weight_version=engine.weight_version(), prompt_form=str(info["prompt_form"]))

    @app.get("/health", response_model=HealthResponse,
             responses=_documented(503, s503="Paused, updating weights, shutting down, or the one-token generation "
                                                  "failed."))
    def health() -> JSONResponse:
        """Readiness: 503 while paused, updating or shutting down, else a one-token greedy generation must succeed."""
        if gate.closed:
            return error_response("shutting down", 503)
        if gate.paused or gate.busy_updating:
            return error_response("paused or updating weights", 503)
        try:
            with gate.generation(wait_s=0):
                prompt = engine.codec.encode("def f(x):") or [engine.codec.pad_token_id()]
                engine.sample([prompt], HEALTH_SAMPLING)
        except TimeoutError:
            return error_response("paused", 503)
        except Exception as exc:  # any failure of the engine means not ready
            return error_response(f"generation failed: {exc}", 503)
        return JSONResponse({"status": "ok"})

    @app.get("/healthz", response_model=HealthResponse)
    def healthz() -> HealthResponse:
        """Liveness: the process answers."""
        return HealthResponse(status="ok")
