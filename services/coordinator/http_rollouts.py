"""Rollouts through the proposer and solver APIs (the distributed profile's coordinator → `POST /v1/propose`,
`POST /v1/solve`). Transient failures (connection errors, 502/503/504) are retried with backoff; anything else
is raised with the API's reason."""

from __future__ import annotations

import time
from typing import Any, Sequence

import httpx

from services.algorithm.task_types import TaskType
from services.ports import SamplingParams
from services.records import Proposal, SolveTask, Solution
from services.rollouts.proposing import ProposeContext
from services.rollouts.wire import (MAX_TASKS_PER_REQUEST, ProposeRequest, ProposeResponse, ReferenceIn, SolveRequest,
                                   SolveResponse)

RETRYABLE_STATUS = {502, 503, 504}


class RolloutApiError(RuntimeError):
    """The proposer or solver API refused the request or kept failing."""


class HttpRollouts:
    """Rollouts over HTTP; implements services.coordinator.rollout_port.Rollouts."""

    def __init__(self, proposer_url: str, solver_url: str, token: str, *, timeout_s: float = 3600.0,
                 retries: int = 4, backoff_s: float = 1.0) -> None:
        self.proposer_url, self.solver_url = proposer_url.rstrip("/"), solver_url.rstrip("/")
        self.retries, self.backoff_s = retries, backoff_s
        self.client = httpx.Client(timeout=timeout_s, headers={"Authorization": f"Bearer {token}"})

    def close(self) -> None:
        self.client.close()

    def propose(self, task_type: TaskType, contexts: Sequence[ProposeContext], sampling: SamplingParams,
                num_inputs: int) -> list[Proposal]:
        if not contexts:
            return []
        references = [[ReferenceIn(id=rid or None, program=r.program, input=r.input, output=r.output)
                       for r, rid in zip(c.references, list(c.reference_ids) + [""] * len(c.references))]
                      for c in contexts]
        request = ProposeRequest(task_type=task_type, count=len(contexts), references=references,
                                 sampling=sampling, num_inputs=num_inputs)
        body = self._post(f"{self.proposer_url}/v1/propose", request.model_dump(mode="json"))
        return ProposeResponse.model_validate(body).proposals

    def solve(self, task_type: TaskType, tasks: Sequence[SolveTask], sampling: SamplingParams) -> list[list[Solution]]:
        """`sampling.n` solutions per task; more tasks than one request may carry (an evaluation's rows) go in
        consecutive requests of at most MAX_TASKS_PER_REQUEST."""
        groups: list[list[Solution]] = []
        for start in range(0, len(tasks), MAX_TASKS_PER_REQUEST):
            chunk = list(tasks[start:start + MAX_TASKS_PER_REQUEST])
            request = SolveRequest(task_type=task_type, tasks=chunk, n=sampling.n,
                                   sampling=sampling.model_copy(update={"n": 1}), check=False)
            body = self._post(f"{self.solver_url}/v1/solve", request.model_dump(mode="json"))
            solutions = SolveResponse.model_validate(body).solutions
            if len(solutions) != len(chunk):
                raise RolloutApiError(f"{self.solver_url}/v1/solve answered {len(solutions)} solution groups for "
                                      f"{len(chunk)} tasks")
            groups += solutions
        return groups

    def _post(self, url: str, payload: dict[str, Any]) -> Any:
        failure = ""
        for attempt in range(self.retries + 1):
            if attempt:
                time.sleep(self.backoff_s * 2 ** (attempt - 1))
            try:
                response = self.client.post(url, json=payload)
            except httpx.TransportError as exc:
                failure = f"{type(exc).__name__}: {exc}"
                continue
            if response.status_code in RETRYABLE_STATUS:
                failure = f"HTTP {response.status_code}: {response.text[:300]}"
                continue
            if response.status_code >= 400:
                raise RolloutApiError(f"{url} answered {response.status_code}: {response.text[:500]}")
            return response.json()
        raise RolloutApiError(f"{url} failed after {self.retries + 1} attempts: {failure}")
