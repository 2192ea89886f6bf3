"""One self-play step of Algorithm 1: propose → validate → store → learnability → solve → rewards → episodes.

Executor work overlaps generation: validations of one task type's proposals and the checks of one batch of
answers run on a thread pool (through the CodeExecutor port: the in-process sandbox pool, or RQ jobs) while the
engine generates the next batch. Every valid proposal joins its buffer whatever its reward (§3.3.2); a proposal
that fails parsing or validation still becomes an episode with the format reward −1, so the model learns from it.
Episode ids are deterministic (`run/step/type/role/index`): re-running a step after a crash publishes the same
ids, and the trainer applies each id once.
"""

from __future__ import annotations

import random
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from services.algorithm.objectives import propose_reward, solve_reward
from services.algorithm.prompts import ReferenceTriplet
from services.algorithm.task_metrics import AnswerHistory, TaskMetrics, aggregate_task_metrics, task_metrics
from services.algorithm.task_types import Role, TaskType
from services.coordinator.rollout_port import Rollouts
from services.coordinator.step_metrics import PhaseTimer, counts, episode_metrics
from services.ports import BufferEntry, CodeExecutor, EpisodeQueue, SamplingParams, TripletStore
from services.records import Episode, InductionTask, Proposal, SolveTask, Solution, Triplet, TripletSource
from services.rollouts.proposing import ProposeContext
from services.rollouts.solving import check_solution, solve_task_from_entry
from services.rollouts.validation import ValidatedProposal, validate_proposal


@dataclass(frozen=True)
class StepConfig:
    """The sizes and sampling of one step (from Settings; the embedded profile only shrinks sizes)."""

    batch_size: int  # B per (task type x role)
    references_k: int  # K
    learnability_samples: int  # n
    induction_inputs: int  # N
    max_response_tokens: int
    temperature: float
    top_p: float

    @classmethod
    def from_settings(cls, settings: Any) -> StepConfig:
        return cls(batch_size=settings.batch_size, references_k=settings.references_k,
                   learnability_samples=settings.learnability_samples, induction_inputs=settings.induction_inputs,
                   max_response_tokens=settings.max_response_tokens, temperature=settings.temperature,
                   top_p=settings.top_p)

    def sampling(self, n: int = 1, seed: int | None = None) -> SamplingParams:
        return SamplingParams(max_new_tokens=self.max_response_tokens, temperature=self.temperature,
                              top_p=self.top_p, n=n, seed=seed)


@dataclass
class StepResult:
    """What one step produced: its episodes, the metrics line, and the ids it added to each buffer."""

    step: int
    episodes: list[Episode]
    metrics: dict[str, Any]
    new_ids: dict[TaskType, list[str]] = field(default_factory=dict)


def to_reference(entry: Triplet) -> ReferenceTriplet:
    return ReferenceTriplet(entry.program, entry.input, entry.output)


def answer_of(entry: BufferEntry) -> str:
    """What a solver must produce for an entry, for answer diversity: deduction's output, abduction's input (both
    kept per buffer), induction's outputs joined."""
    if isinstance(entry, InductionTask):
        return " | ".join(entry.outputs)
    return entry.output if entry.buffer is TaskType.DEDUCTION else entry.input


def weight_version_int(text: str, fallback: int) -> int:
    """SGLang reports `weight_version` as a string ("default" before any update): our integer, or the fallback."""
    try:
        return int(text)
    except ValueError:
        return fallback


class ProposalRound:
    """Propose → validate → store, for one or more task types; shared by seeding and the self-play step."""

    def __init__(self, *, store: TripletStore, executor: CodeExecutor, rollouts: Rollouts, config: StepConfig,
                 pool: ThreadPoolExecutor, timer: PhaseTimer) -> None:
        self.store, self.executor, self.rollouts, self.config = store, executor, rollouts, config
        self.pool, self.timer = pool, timer

    def contexts(self, task_type: TaskType, count: int, rng: random.Random) -> list[ProposeContext]:
        """K references from the task type's buffer (deduction/abduction) or one program of D_abd ∪ D_ded."""
        contexts = []
        with self.timer.phase("store_queue"):
            for _ in range(count):
                if task_type is TaskType.INDUCTION:
                    program = self.store.sample_program(rng)
                    if program is None:
                        return []
                    contexts.append(ProposeContext([to_reference(program)], [program.id or ""]))
                else:
                    refs = self.store.sample_references(task_type, self.config.references_k, rng)
                    contexts.append(ProposeContext([to_reference(r) for r in refs], [r.id or "" for r in refs]))
        return contexts

    def generate(self, task_type: TaskType, count: int, rng: random.Random, *, step: int, policy_version: int,
                 source: TripletSource) -> tuple[list[Proposal], list[Future[ValidatedProposal]], list[ProposeContext]]:
        """Generate `count` proposals and start their validations (not awaited); also the contexts they were shown."""
        contexts = self.contexts(task_type, count, rng)
        with self.timer.phase("generation"):
            proposals = self.rollouts.propose(task_type, contexts, self.config.sampling(seed=rng.getrandbits(31)),
                                              self.config.induction_inputs)
        futures = [self.pool.submit(validate_proposal, self.executor, proposal,
                                    step=step, policy_version=policy_version, source=source)
                   for proposal in proposals]
        return proposals, futures, contexts

    def store_valid(self, futures: Sequence[Future[ValidatedProposal]]) -> tuple[list[ValidatedProposal],
                                                                               list[BufferEntry], list[str]]:
        """Await validations; insert valid entries. Returns (all verdicts, valid entries with ids, newly stored ids)."""
        verdicts, entries, created = [], [], []
        for future in futures:
            with self.timer.phase("executor"):
                verdict = future.result()
            verdicts.append(verdict)
            if verdict.entry is None:
                continue
            with self.timer.phase("store_queue"):
                if isinstance(verdict.entry, InductionTask):
                    outcome = self.store.insert_induction(verdict.entry)
                else:
                    outcome = self.store.insert_triplet(verdict.entry)
            entries.append(verdict.entry.model_copy(update={"id": outcome.id}))
            if outcome.created:
                created.append(outcome.id)
        return verdicts, entries, created


class SelfPlayStep:
    """Runs steps of Algorithm 1 against the ports; owns a thread pool for executor calls."""

    def __init__(self, *, run_id: str, store: TripletStore, executor: CodeExecutor, rollouts: Rollouts,
                 episodes: EpisodeQueue, config: StepConfig, executor_parallelism: int = 8) -> None:
        self.run_id, self.store, self.executor, self.rollouts = run_id, store, executor, rollouts
        self.episodes, self.config = episodes, config
        self.pool = ThreadPoolExecutor(max_workers=executor_parallelism, thread_name_prefix="azr-coordinator")
        self.answers = AnswerHistory()  # answer diversity (App. C.4) over this process's past valid tasks
        self.progress: Callable[[str], None] = lambda _message: None  # the loop sets its progress display here

    def close(self) -> None:
        self.pool.shutdown(wait=True, cancel_futures=True)

    def run(self, step: int, policy_version: int, rng: random.Random) -> StepResult:
        """One full step; publishes 6·B episodes (fewer only where a buffer is empty) and returns them."""
        timer = PhaseTimer()
        round_ = ProposalRound(store=self.store, executor=self.executor, rollouts=self.rollouts, config=self.config,
                               pool=self.pool, timer=timer)
        B = self.config.batch_size
        pending = {t: round_.generate(t, B, rng, step=step, policy_version=policy_version,
                                      source=TripletSource.PROPOSED) for t in TaskType}
        verdicts: dict[TaskType, list[ValidatedProposal]] = {}
        valid: dict[TaskType, list[BufferEntry]] = {}
        new_ids: dict[TaskType, list[str]] = {}
        for t in TaskType:
            verdicts[t], valid[t], new_ids[t] = round_.store_valid(pending[t][1])
        complexity = {t: self._measure_tasks(t, verdicts[t], pending[t][2]) for t in TaskType}
        self.progress(f"step {step}: valid proposals " + ", ".join(f"{t.value} {len(valid[t])}/{len(verdicts[t])}"
                                                                   for t in TaskType)
                      + f"; learnability: {self.config.learnability_samples} solver samples each, then the solve "
                        f"batches")

        learn_sampling = self.config.sampling(n=self.config.learnability_samples, seed=rng.getrandbits(31))
        learn_checks = {t: self._solve_and_check(t, [solve_task_from_entry(e) for e in valid[t]], learn_sampling,
                                                 timer) for t in TaskType}
        batches: dict[TaskType, list[SolveTask]] = {}
        for t in TaskType:
            step_ids = list(dict.fromkeys([e.id or "" for e in valid[t]]))  # this step's tasks, new or not
            with timer.phase("store_queue"):
                batch = self.store.sample_batch(t, B, step_ids, rng) if self.store.count(t) else []
            batches[t] = [solve_task_from_entry(entry) for entry in batch]
        solve_checks = {t: self._solve_and_check(t, batches[t], self.config.sampling(seed=rng.getrandbits(31)),
                                                 timer) for t in TaskType}

        episodes: list[Episode] = []
        metrics: dict[str, Any] = {"step": step, "policy_version": policy_version}
        for t in TaskType:
            learn = [[self._await(f, timer) for f in group] for group in learn_checks[t]]
            solved = [self._await(group[0], timer) for group in solve_checks[t]]
            episodes += self._propose_episodes(step, policy_version, t, verdicts[t], learn)
            episodes += self._solve_episodes(step, policy_version, t, batches[t], solved)
            metrics[f"valid_rate/{t.value}"] = round(len(valid[t]) / len(verdicts[t]), 6) if verdicts[t] else None
            metrics[f"new/{t.value}"] = len(new_ids[t])
            metrics[f"solve_rate/{t.value}"] = round(sum(bool(s.correct) for s in solved) / len(solved), 6) \
                if solved else None
            rbar = [sum(bool(s.correct) for s in group) / len(group) for group in learn if group]
            metrics[f"learnability/{t.value}"] = round(sum(rbar) / len(rbar), 6) if rbar else None
            metrics.update(counts(f"parse_failures/{t.value}", [v.proposal.parse_failure for v in verdicts[t]]))
            metrics.update(counts(f"exec_status/{t.value}/propose", [v.status for v in verdicts[t]]))
            metrics.update(counts(f"exec_status/{t.value}/solve", [s.exec_status for s in solved]))
        measured = [future.result() for t in TaskType for future in complexity[t]]
        metrics.update({f"task/{name}": round(value, 6) for name, value in aggregate_task_metrics(measured).items()})
        for t in TaskType:  # observed after scoring: each proposal is compared with earlier answers only
            self.answers.observe_all(t, [answer_of(entry) for entry in valid[t]])
        with timer.phase("store_queue"):
            self.episodes.publish(episodes)
            for t in TaskType:
                metrics[f"buffer/{t.value}"] = self.store.count(t)
        metrics.update(episode_metrics(episodes))
        metrics.update(timer.breakdown())
        return StepResult(step=step, episodes=episodes, metrics=metrics, new_ids=new_ids)

    # ---------------------------------------------------------------------------------------------------- helpers

    def _solve_and_check(self, task_type: TaskType, tasks: list[SolveTask], sampling: SamplingParams,
                         timer: PhaseTimer) -> list[list[Future[Solution]]]:
        """Generate solutions for `tasks` and start their checks (awaited later, overlapping the next generation)."""
        if not tasks:
            return []
        with timer.phase("generation"):
            groups = self.rollouts.solve(task_type, tasks, sampling)
        return [[self.pool.submit(check_solution, self.executor, task_type, task, solution) for solution in group]
                for task, group in zip(tasks, groups)]

    def _measure_tasks(self, task_type: TaskType, verdicts: list[ValidatedProposal],
                       contexts: list[ProposeContext]) -> list[Future[TaskMetrics]]:
        """App. C.4 metrics of each valid proposal, computed on the pool (off the critical path)."""
        futures = []
        for verdict, context in zip(verdicts, contexts):
            if verdict.entry is None:
                continue
            references = [] if task_type is TaskType.INDUCTION else [r.program for r in context.references]
            futures.append(self.pool.submit(task_metrics, verdict.entry.program, references,
                                            answer_of(verdict.entry), self.answers, task_type=task_type))
        return futures

    @staticmethod
    def _await(future: Future[Solution], timer: PhaseTimer) -> Solution:
        with timer.phase("executor"):
            return future.result()

    def _episode_id(self, step: int, task_type: TaskType, role: Role, index: int) -> str:
        return f"{self.run_id}/{step}/{task_type.value}/{role.value}/{index}"

    def _propose_episodes(self, step: int, policy_version: int, task_type: TaskType,
                          verdicts: list[ValidatedProposal], learn: list[list[Solution]]) -> list[Episode]:
        """Eq 6 ∘ Eq 4 per proposal; `learn` holds the n checked samples of each VALID proposal, in order."""
        episodes, samples = [], iter(learn)
        for index, verdict in enumerate(verdicts):
            proposal = verdict.proposal
            successes = [bool(s.correct) for s in next(samples)] if verdict.valid else None
            reward = propose_reward(successes, well_formed=proposal.task is not None, valid_task=verdict.valid)
            episodes.append(Episode(
                id=self._episode_id(step, task_type, Role.PROPOSE, index), run_id=self.run_id, step=step,
                task_type=task_type, role=Role.PROPOSE, prompt_ids=proposal.prompt_ids,
                response_ids=proposal.response_ids, behaviour_logprobs=proposal.behaviour_logprobs or None,
                reward=reward, policy_version=weight_version_int(proposal.weight_version, policy_version),
                text=proposal.text, task_id=verdict.entry.id if verdict.entry is not None else None,
                exec_status=verdict.status or proposal.parse_failure))
        return episodes

    def _solve_episodes(self, step: int, policy_version: int, task_type: TaskType, tasks: list[SolveTask],
                        solved: list[Solution]) -> list[Episode]:
        """Eq 6 ∘ Eq 5 per solver answer."""
        episodes = []
        for index, (task, solution) in enumerate(zip(tasks, solved)):
            reward = solve_reward(bool(solution.correct), well_formed=solution.answer is not None)
            episodes.append(Episode(
                id=self._episode_id(step, task_type, Role.SOLVE, index), run_id=self.run_id, step=step,
                task_type=task_type, role=Role.SOLVE, prompt_ids=solution.prompt_ids,
                response_ids=solution.response_ids, behaviour_logprobs=solution.behaviour_logprobs or None,
                reward=reward, policy_version=weight_version_int(solution.weight_version, policy_version),
                text=solution.text, task_id=task.task_id,
                exec_status=solution.exec_status or solution.parse_failure))
        return episodes
