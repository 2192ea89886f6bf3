"""Propose → validate → store for one task type: what seeding and the self-play step share.

Contexts (what a proposer prompt shows) are drawn from the buffers and drawn again while their prompt is longer than
`max_prompt_tokens` (the authors' rule); validations run on the step's thread pool while generation goes on.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Collection, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

from services.algorithm.task_types import TaskType
from services.coordinator.step_config import StepConfig, to_reference
from services.coordinator.step_metrics import PhaseTimer
from services.ports import BufferEntry, CodeExecutor, ProposeContext, Rollouts, TripletStore
from services.records import InductionTask, Solution, SolveTask, TripletSource
from services.rollouts.proposing import proposer_instruction
from services.rollouts.solving import solver_instruction
from services.rollouts.validation import ValidatedProposal, validate_proposal

PROMPT_REDRAWS = 32
"""Times a proposer's references are drawn again while its prompt is over `max_prompt_tokens`; after that the
shortest prompt seen is used and counted in `prompt_over_limit/<type>`."""


@dataclass(frozen=True)
class PendingProposals:
    """One task type's proposals from one batched generation, their validations started (not awaited); each
    verdict carries its proposal."""

    validations: list[Future[ValidatedProposal]]  # one per proposal, in order
    contexts: list[ProposeContext]  # what each proposal's prompt showed, in order


@dataclass(frozen=True)
class StoredProposals:
    """One task type's verdicts and what storing them did."""

    verdicts: list[ValidatedProposal]  # every verdict, in proposal order
    entries: dict[int, BufferEntry]  # the valid entries stored, with their buffer ids, by verdict index
    created: list[str]  # ids new to their buffer (a duplicate keeps the id it already had)


@dataclass(frozen=True)
class RoundRollouts:
    """A round's proposals (validations started) and the solutions generated with them."""

    pending: dict[TaskType, PendingProposals]
    solutions: dict[TaskType, list[Solution]]  # one per solve task given, in order


class ProposalRound:
    """Propose → validate → store, for one or more task types; shared by seeding and the self-play step."""

    def __init__(self, *, store: TripletStore, executor: CodeExecutor, rollouts: Rollouts, config: StepConfig,
                 pool: ThreadPoolExecutor, timer: PhaseTimer) -> None:
        self.store, self.executor, self.rollouts, self.config = store, executor, rollouts, config
        self.pool, self.timer = pool, timer
        self.over_limit: Counter[str] = Counter()  # prompts used although over the limit, per task type

    def _draw(self, task_type: TaskType, rng: random.Random) -> ProposeContext | None:
        """K references from the task type's buffer (deduction/abduction) or one program of D_abd ∪ D_ded."""
        if task_type is TaskType.INDUCTION:
            program = self.store.sample_program(rng)
            if program is None:
                return None
            return ProposeContext([to_reference(program)], [program.id or ""])
        refs = self.store.sample_references(task_type, self.config.references_k, rng)
        return ProposeContext([to_reference(r) for r in refs], [r.id or "" for r in refs])

    def contexts(self, task_type: TaskType, count: int, rng: random.Random) -> list[ProposeContext]:
        """`count` contexts whose prompts fit `max_prompt_tokens`, drawn again (up to PROMPT_REDRAWS times) while
        they do not (the authors' rule); empty when the buffers hold nothing to show."""
        limit = self.config.max_prompt_tokens
        with self.timer.phase("store_queue"):
            drawn = [self._draw(task_type, rng) for _ in range(count)]
            if any(context is None for context in drawn):
                return []
            contexts: list[ProposeContext] = [c for c in drawn if c is not None]
            if limit <= 0:
                return contexts
            best: list[tuple[int, ProposeContext]] = [(0, c) for c in contexts]
            pending = list(range(count))
            for attempt in range(PROMPT_REDRAWS + 1):
                instructions = [proposer_instruction(task_type, contexts[i], self.config.induction_inputs)
                                for i in pending]
                lengths = self.rollouts.prompt_tokens(instructions)
                still = []
                for index, length in zip(pending, lengths):
                    if length <= limit:
                        continue
                    if attempt == 0 or length < best[index][0]:
                        best[index] = (length, contexts[index])
                    still.append(index)
                pending = still
                if not pending or attempt == PROMPT_REDRAWS:
                    break
                for index in pending:
                    contexts[index] = self._draw(task_type, rng) or contexts[index]
            for index in pending:  # nothing fitted: the shortest seen, counted
                contexts[index] = best[index][1]
                self.over_limit[task_type.value] += 1
        return contexts

    def fitting_tasks(self, task_type: TaskType, tasks: list[SolveTask]) -> list[bool]:
        """Whether each task's solver prompt fits `max_prompt_tokens` (all do when the limit is 0)."""
        if self.config.max_prompt_tokens <= 0 or not tasks:
            return [True] * len(tasks)
        with self.timer.phase("store_queue"):
            lengths = self.rollouts.prompt_tokens([solver_instruction(task_type, task) for task in tasks])
        return [length <= self.config.max_prompt_tokens for length in lengths]

    def generate(self, task_types: Sequence[TaskType], count: int, rng: random.Random, *, step: int,
                 policy_version: int, source: TripletSource, strip: bool = False
                 ) -> dict[TaskType, PendingProposals]:
        """`count` proposals of each task type from one batched generation, their validations started (not
        awaited). `strip`: seeding's rule, programs lose comments and global variables before validation
        (§3.3.1)."""
        return self.generate_with_answers(task_types, count, rng, step=step, policy_version=policy_version,
                                          source=source, strip=strip, solve_tasks={}).pending

    def generate_with_answers(self, task_types: Sequence[TaskType], count: int, rng: random.Random, *, step: int,
                              policy_version: int, source: TripletSource, strip: bool = False,
                              solve_tasks: Mapping[TaskType, Sequence[SolveTask]]) -> RoundRollouts:
        """As `generate`, with one solution to each of `solve_tasks` from the same generation (read, not checked)."""
        contexts = {task_type: self.contexts(task_type, count, rng) for task_type in task_types}
        sampling = self.config.sampling(seed=rng.getrandbits(31))
        solutions: dict[TaskType, list[Solution]] = {}
        with self.timer.phase("generation"):
            if any(solve_tasks.values()):
                both = self.rollouts.propose_and_solve(contexts, solve_tasks, sampling, self.config.induction_inputs)
                proposals, solutions = both.proposals, both.solutions
            else:
                proposals = self.rollouts.propose(contexts, sampling, self.config.induction_inputs)
        pending = {}
        for task_type in task_types:
            futures = [self.pool.submit(validate_proposal, self.executor, proposal, step=step,
                                        policy_version=policy_version, source=source, strip=strip)
                       for proposal in proposals.get(task_type, [])]
            pending[task_type] = PendingProposals(validations=futures, contexts=contexts[task_type])
        return RoundRollouts(pending=pending, solutions=solutions)

    def await_verdicts(self, futures: Sequence[Future[ValidatedProposal]]) -> list[ValidatedProposal]:
        """The validations' verdicts, in order."""
        verdicts = []
        for future in futures:
            with self.timer.phase("executor"):
                verdicts.append(future.result())
        return verdicts

    def store_entries(self, verdicts: Sequence[ValidatedProposal], skip: Collection[int] = ()) -> StoredProposals:
        """Insert the valid entries of `verdicts` but those at `skip`."""
        entries: dict[int, BufferEntry] = {}
        created = []
        for index, verdict in enumerate(verdicts):
            if verdict.entry is None or index in skip:
                continue
            with self.timer.phase("store_queue"):
                if isinstance(verdict.entry, InductionTask):
                    outcome = self.store.insert_induction(verdict.entry)
                else:
                    outcome = self.store.insert_triplet(verdict.entry)
            entries[index] = verdict.entry.model_copy(update={"id": outcome.id})
            if outcome.created:
                created.append(outcome.id)
        return StoredProposals(verdicts=list(verdicts), entries=entries, created=created)

    def store_valid(self, pending: PendingProposals) -> StoredProposals:
        """Await the validations of `pending` and insert its valid entries."""
        return self.store_entries(self.await_verdicts(pending.validations))


