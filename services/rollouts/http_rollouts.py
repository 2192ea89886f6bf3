"""Rollouts through the proposer and solver APIs (the distributed profile's coordinator → `POST /v1/propose`,
`POST /v1/solve`). The requests of one phase (one per task type, and per chunk of tasks) go out concurrently, so the
SGLang servers behind the APIs batch them together. Transient failures (connection errors, 502/503/504: an API or
the inference server behind it restarting) are retried with backoff and a log line until they have lasted
`outage_s`; anything else is raised with the API's reason."""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

import httpx

from services.algorithm.task_types import TaskType
from services.json_types import JsonObject, JsonValue
from services.ports import ProposalsAndSolutions, ProposeContext, SamplingParams
from services.records import Proposal, Solution, SolveTask
from services.rollouts.http_schemas import (
    MAX_INSTRUCTIONS_PER_REQUEST,
    MAX_TASKS_PER_REQUEST,
    PromptTokensRequest,
    PromptTokensResponse,
    ProposeRequest,
    ProposeResponse,
    ReferenceIn,
    SolveRequest,
    SolveResponse,
)

RETRYABLE_STATUS = {502, 503, 504}
T = TypeVar("T")
log = logging.getLogger(__name__)


class RolloutApiError(RuntimeError):
    """The proposer or solver API refused the request or kept failing."""


class HttpRollouts:
    """Rollouts over HTTP; implements services.ports.Rollouts."""

    def __init__(self, proposer_url: str, solver_url: str, token: str, *, timeout_s: float = 3600.0,
                 outage_s: float = 120.0, backoff_s: float = 1.0, max_backoff_s: float = 10.0,
                 max_concurrent_requests: int = 16) -> None:
        """`outage_s`: how long a request keeps being retried while its API is unreachable or answers 502/503/504
        (0: no retry); the pause between tries starts at `backoff_s` and doubles up to `max_backoff_s`."""
        self.proposer_url, self.solver_url = proposer_url.rstrip("/"), solver_url.rstrip("/")
        self.outage_s, self.backoff_s, self.max_backoff_s = outage_s, backoff_s, max_backoff_s
        self.max_concurrent_requests = max_concurrent_requests
        self.client = httpx.Client(timeout=timeout_s, headers={"Authorization": f"Bearer {token}"})

    def close(self) -> None:
        self.client.close()

    def propose(self, contexts: Mapping[TaskType, Sequence[ProposeContext]], sampling: SamplingParams,
                num_inputs: int) -> dict[TaskType, list[Proposal]]:
        """One `POST /v1/propose` per task type, sent concurrently."""
        def one(task_type: TaskType) -> list[Proposal]:
            group = contexts[task_type]
            if not group:
                return []
            references = [[ReferenceIn(id=rid or None, program=r.program, input=r.input, output=r.output)
                           for r, rid in zip(c.references, list(c.reference_ids) + [""] * len(c.references))]
                          for c in group]
            request = ProposeRequest(task_type=task_type, count=len(group), references=references,
                                     sampling=sampling, num_inputs=num_inputs)
            body = self._post(f"{self.proposer_url}/v1/propose", request.model_dump(mode="json"))
            return ProposeResponse.model_validate(body).proposals

        types = list(contexts)
        return dict(zip(types, self._concurrently([functools.partial(one, t) for t in types])))

    def solve(self, tasks: Mapping[TaskType, Sequence[SolveTask]],
              sampling: SamplingParams) -> dict[TaskType, list[list[Solution]]]:
        """`sampling.n` solutions per task: one `POST /v1/solve` per task type and per MAX_TASKS_PER_REQUEST tasks
        (an evaluation's rows), all sent concurrently."""
        calls: list[tuple[TaskType, list[SolveTask]]] = [
            (task_type, list(group[start:start + MAX_TASKS_PER_REQUEST]))
            for task_type, group in tasks.items() for start in range(0, len(group), MAX_TASKS_PER_REQUEST)]

        def one(task_type: TaskType, chunk: list[SolveTask]) -> list[list[Solution]]:
            request = SolveRequest(task_type=task_type, tasks=chunk, n=sampling.n,
                                   sampling=sampling.model_copy(update={"n": 1}), check=False)
            body = self._post(f"{self.solver_url}/v1/solve", request.model_dump(mode="json"))
            solutions = SolveResponse.model_validate(body).solutions
            if len(solutions) != len(chunk):
                raise RolloutApiError(f"{self.solver_url}/v1/solve answered {len(solutions)} solution groups for "
                                      f"{len(chunk)} tasks")
            return solutions

        answers = self._concurrently([functools.partial(one, t, c) for t, c in calls])
        out: dict[TaskType, list[list[Solution]]] = {task_type: [] for task_type in tasks}
        for (task_type, _), groups in zip(calls, answers):
            out[task_type] += groups
        return out

    def propose_and_solve(self, contexts: Mapping[TaskType, Sequence[ProposeContext]],
                          tasks: Mapping[TaskType, Sequence[SolveTask]], sampling: SamplingParams,
                          num_inputs: int) -> ProposalsAndSolutions:
        """Both APIs' requests at once (their inference servers batch them as they arrive)."""
        with ThreadPoolExecutor(max_workers=2, thread_name_prefix="azr-rollout-both") as pool:
            proposed = pool.submit(self.propose, contexts, sampling, num_inputs)
            solved = pool.submit(self.solve, tasks, sampling) if any(tasks.values()) else None
            solutions = solved.result() if solved is not None else {task_type: [] for task_type in tasks}
            return ProposalsAndSolutions(proposals=proposed.result(),
                                         solutions={t: [group[0] for group in groups]
                                                    for t, groups in solutions.items()})

    def _concurrently(self, calls: Sequence[Callable[[], T]]) -> list[T]:
        """Run the calls on threads (at most `max_concurrent_requests` at once); results in order."""
        if len(calls) <= 1:
            return [call() for call in calls]
        with ThreadPoolExecutor(max_workers=min(len(calls), self.max_concurrent_requests),
                                thread_name_prefix="azr-rollout-http") as pool:
            return list(pool.map(lambda call: call(), calls))

    def prompt_tokens(self, instructions: Sequence[str]) -> list[int]:
        """Prompt lengths counted by the proposer API with the served model's tokenizer (`POST /v1/prompt_tokens`)."""
        if not instructions:
            return []
        lengths: list[int] = []
        for start in range(0, len(instructions), MAX_INSTRUCTIONS_PER_REQUEST):
            chunk = list(instructions[start:start + MAX_INSTRUCTIONS_PER_REQUEST])
            body = self._post(f"{self.proposer_url}/v1/prompt_tokens",
                              PromptTokensRequest(instructions=chunk).model_dump(mode="json"))
            counted = PromptTokensResponse.model_validate(body).tokens
            if len(counted) != len(chunk):
                raise RolloutApiError(f"/v1/prompt_tokens answered {len(counted)} lengths for {len(chunk)} prompts")
            lengths += counted
        return lengths

    def _post(self, url: str, payload: JsonObject) -> JsonValue:
        began: float | None = None
        wait, tries = self.backoff_s, 0
        while True:
            tries += 1
            try:
                response = self.client.post(url, json=payload)
            except httpx.TransportError as exc:
                failure = f"{type(exc).__name__}: {exc}"
            else:
                if response.status_code not in RETRYABLE_STATUS:
                    if response.status_code >= 400:
                        raise RolloutApiError(f"{url} answered {response.status_code}: {response.text[:500]}")
                    return response.json()
                failure = f"HTTP {response.status_code}: {response.text[:300]}"
            now = time.monotonic()
            began = now if began is None else began
            left = self.outage_s - (now - began)
            if left <= 0:
                raise RolloutApiError(f"{url} failed for {now - began:.1f} s ({tries} tries): {failure}")
            pause = min(wait, self.max_backoff_s, left)
            log.warning("%s unavailable (%s): try %d again in %.1f s (gives up after %.0f s more)", url, failure,
                        tries + 1, pause, left)
            time.sleep(pause)
            wait *= 2
