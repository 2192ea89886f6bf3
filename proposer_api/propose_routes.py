"""`POST /v1/propose`: proposer rollouts (Figs 34-36) on the served policy, parsed, with token ids and logprobs.

References come from the request or are sampled here from the buffers (K from the task type's buffer; one program
of D_abd ∪ D_ded for induction). Generation runs in a worker thread so the event loop keeps serving health probes;
`sampling.max_new_tokens` is clamped to `max_response_tokens`, and generation stops when the client goes away
(services/rollouts/bounded_generation.py).
"""

from __future__ import annotations

import random
import threading
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from fastapi import APIRouter, Depends, HTTPException, Request
from starlette.concurrency import run_in_threadpool

from proposer_api.prometheus_metrics import ProposerMetrics
from services.algorithm.prompts import ReferenceTriplet
from services.algorithm.task_types import TaskType
from services.http.errors import WRITE_STATUSES, DependencyFailure, documented
from services.http.ops import run_watching_client
from services.ports import InferenceEngine, InferenceError, ProposeContext, SamplingParams, TripletStore
from services.records import Proposal
from services.rollouts.bounded_generation import AbortableEngine, clamped
from services.rollouts.http_schemas import (
    PromptTokensRequest,
    PromptTokensResponse,
    ProposeRequest,
    ProposeResponse,
    ReferenceIn,
)
from services.rollouts.proposing import propose
from services.settings import RolloutSettings


@dataclass(frozen=True)
class ProposeDefaults:
    """What `POST /v1/propose` takes from the settings when a request leaves it out, and the proposer reading rule."""

    references_k: int  # K references per prompt (deduction/abduction), sampled from the buffer
    num_inputs: int  # N inputs an induction proposer writes
    sampling: SamplingParams
    reject_multiple_functions: bool
    max_new_tokens: int  # no request may ask for more (settings.max_response_tokens)

    @classmethod
    def from_settings(cls, settings: RolloutSettings) -> ProposeDefaults:
        return cls(references_k=settings.references_k, num_inputs=settings.induction_inputs,
                   sampling=SamplingParams(max_new_tokens=settings.max_response_tokens,
                                           temperature=settings.temperature, top_p=settings.top_p),
                   reject_multiple_functions=settings.reject_multiple_functions,
                   max_new_tokens=settings.max_response_tokens)


def _contexts(request: ProposeRequest, store: TripletStore, references_k: int) -> list[ProposeContext]:
    refs = request.references
    if refs:
        groups: list[list[ReferenceIn]] = refs if isinstance(refs[0], list) else [refs] * request.count
        return [ProposeContext([ReferenceTriplet(r.program, r.input, r.output) for r in group],
                               [r.id or "" for r in group]) for group in groups]
    rng = random.Random(request.seed)
    contexts = []
    for _ in range(request.count):
        if request.task_type is TaskType.INDUCTION:
            program = store.sample_program(rng)
            if program is None:
                raise HTTPException(409, "D_abd and D_ded are empty: no program to propose induction inputs for")
            contexts.append(ProposeContext([ReferenceTriplet(program.program, program.input, program.output)],
                                           [program.id or ""]))
        else:
            sampled = store.sample_references(request.task_type, references_k, rng)
            if not sampled:
                raise HTTPException(409, f"D_{request.task_type.value[:3]} is empty: no reference to propose from")
            contexts.append(ProposeContext([ReferenceTriplet(r.program, r.input, r.output) for r in sampled],
                                           [r.id or "" for r in sampled]))
    return contexts


def propose_router(engine: InferenceEngine, store: TripletStore, defaults: ProposeDefaults,
                   require_token: Callable[..., Awaitable[None]], metrics: ProposerMetrics | None = None) -> APIRouter:
    """The router holding `POST /v1/propose` (write route: bearer token, as it spends GPU time); with `metrics`,
    each proposal is counted by task type and parse outcome."""
    router = APIRouter()

    @router.post("/v1/propose", response_model=ProposeResponse, dependencies=[Depends(require_token)],
                 summary="Generate proposals for one task type",
                 responses=documented(*WRITE_STATUSES, 409, 503,
                                      s409="No references given and the buffer holds none to sample.",
                                      s503="Inference failed, or the database is unavailable."))
    async def propose_route(request: ProposeRequest, connection: Request) -> ProposeResponse:
        contexts = await run_in_threadpool(_contexts, request, store, defaults.references_k)
        sampling = clamped(request.sampling or defaults.sampling, defaults.max_new_tokens)
        num_inputs = request.num_inputs or defaults.num_inputs

        def generate(abort: threading.Event) -> list[Proposal]:
            return propose(AbortableEngine(engine, abort), {request.task_type: contexts}, sampling, num_inputs,
                           defaults.reject_multiple_functions)[request.task_type]

        try:
            proposals = await run_watching_client(connection, generate)
        except InferenceError as exc:
            raise DependencyFailure("inference", str(exc)) from exc
        if metrics is not None:
            metrics.observe(proposals)
        return ProposeResponse(proposals=proposals, weight_version=engine.weight_version())

    @router.post("/v1/prompt_tokens", response_model=PromptTokensResponse, dependencies=[Depends(require_token)],
                 summary="Prompt lengths in tokens (the coordinator keeps prompts under max_prompt_tokens)",
                 responses=documented(*WRITE_STATUSES))
    async def prompt_tokens_route(request: PromptTokensRequest) -> PromptTokensResponse:
        def count() -> list[int]:
            return [len(engine.prompt_ids(instruction)) for instruction in request.instructions]

        return PromptTokensResponse(tokens=await run_in_threadpool(count))

    return router
