"""`POST /v1/seeds`: submit one seed program, validated by the executor before it is stored, as a `user` entry (evicted
like proposals), at most `seed_submission_quota` of them per buffer."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Annotated

from fastapi import APIRouter, Body, Depends, Response
from fastapi.concurrency import run_in_threadpool

from proposer_api.schemas import InductionSeed, ProgramSeed, SeedAccepted, SeedProblem
from proposer_api.seed_submission import submit_induction_seed, submit_program_seed
from services.http.errors import WRITE_STATUSES, documented
from services.json_types import JsonObject
from services.ports import CodeExecutor, TripletStore

SEED_EXAMPLES: JsonObject = {
    "program": {"summary": "deduction + abduction", "value": {
        "kind": "program", "program": "def f(a, b):\n    return sorted(a)[::b]", "input": "[3, 1, 2], -1"}},
    "induction": {"summary": "induction", "value": {
        "kind": "induction", "program": "def f(x):\n    return x * 2", "inputs": ["1", "2", "3", "4"],
        "message": "Doubles its argument."}},
}


def seed_router(store: TripletStore, executor: CodeExecutor, require_token: Callable[..., Awaitable[None]],
                quota: int | None = None) -> APIRouter:
    """The seed submission route, guarded by the bearer token; `quota`: submitted entries a buffer may hold."""
    router = APIRouter(prefix="/v1", tags=["seeds"])

    @router.post(
        "/seeds",
        status_code=201,
        response_model=SeedAccepted,
        dependencies=[Depends(require_token)],
        responses={
            **documented(*WRITE_STATUSES, 409, 503, 504,
                         s409="A target buffer holds `seed_submission_quota` submitted entries already."),
            200: {"model": SeedAccepted, "description": "A duplicate: every buffer already held it (existing ids)."},
            422: {"model": SeedProblem, "description": (
                "Not stored. `problem: invalid_request`: a malformed request (`detail` lists the fields at fault); "
                "`problem: seed_rejected`: a well-formed seed whose program the executor refused (its `status` "
                "and `error`).")},
        },
    )
    async def submit_seed(
        response: Response,
        seed: Annotated[ProgramSeed | InductionSeed, Body(discriminator="kind", openapi_examples=SEED_EXAMPLES)],
    ) -> SeedAccepted:
        """Validate the seed through the executor, then store it: 201 when something new was stored."""
        if isinstance(seed, InductionSeed):
            accepted = await run_in_threadpool(submit_induction_seed, seed, executor, store, quota)
        else:
            accepted = await run_in_threadpool(submit_program_seed, seed, executor, store, quota)
        response.status_code = 201 if any(outcome.created for outcome in accepted.outcomes) else 200
        return accepted

    return router
