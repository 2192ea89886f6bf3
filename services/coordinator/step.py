"""One self-play step of Algorithm 1: propose → validate → store → learnability → solve → rewards → episodes.

Executor work overlaps generation: validations of one task type's proposals and the checks of one batch of
answers run on a thread pool (through the CodeExecutor port: the in-process sandbox pool, or RQ jobs) while the
engine generates the next batch. Validity alone decides whether a proposal joins its buffer (§3.3.2); the format
verdict decides its reward with it (Eq 6): an unformatted or invalid proposal still becomes an episode with −1, so
the model learns from it. Learnability (Eq 4) is estimated for the valid, well-formed proposals only (the others
earn −1 whatever their solve rate): n samples, each checked on its answer whatever its format, identical answers to
one task checked once. Prompts longer than `max_prompt_tokens` are never sent: a proposer's references (or shown
program) are drawn again, a solve batch leaves such tasks out and fills up with copies of the ones that fit, and a
valid proposal whose solver prompt does not fit is not stored (as the authors do). An executor that fails twice
for infrastructure reasons drops that episode (and that learnability sample), counted in `dropped/<type>/<role>`.
Episode ids are deterministic (`run/step/type/role/index`): re-running a step after a crash publishes the same
ids, and the trainer applies each id once.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Collection
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from services.algorithm.objectives import propose_reward, solve_reward
from services.algorithm.parsing import learnability_answer
from services.algorithm.task_metrics import AnswerHistory, TaskMetrics, aggregate_task_metrics, task_metrics
from services.algorithm.task_types import Role, TaskType
from services.coordinator.collapse_metrics import collapse_metrics
from services.coordinator.proposal_round import ProposalRound
from services.coordinator.step_config import StepConfig, to_reference
from services.coordinator.step_metrics import PhaseTimer, counts, episode_metrics
from services.ports import (
    BufferEntry,
    CodeExecutor,
    EpisodeQueue,
    ProposeContext,
    Rollouts,
    TripletStore,
)
from services.records import Episode, InductionTask, Solution, SolveTask, TripletSource
from services.rollouts.solving import check_solution, solve_task_from_entry
from services.rollouts.validation import ValidatedProposal

__all__ = ["ProposalRound", "SelfPlayStep", "StepConfig", "StepResult", "answer_of", "to_reference",
           "weight_version_int"]

@dataclass
class StepResult:
    """What one step produced: its episodes, the metrics line, and the ids it added to each buffer."""

    step: int
    episodes: list[Episode]
    metrics: dict[str, Any]
    new_ids: dict[TaskType, list[str]] = field(default_factory=dict)


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


@dataclass(frozen=True)
class _RoleEpisodes:
    """One role's episodes of one task type, and how many of its rollouts were dropped (the executor failed)."""

    episodes: list[Episode]
    dropped: int


@dataclass(frozen=True)
class _SolveSlot:
    """One task of a solver batch and its answer when the proposers' generation already made one (None: to make)."""

    task: SolveTask
    answer: Solution | None = None


@dataclass(frozen=True)
class _PendingSample:
    """A learnability sample and the check of its answer (shared by the samples that give the same answer)."""

    solution: Solution
    check: Future[Solution | None]


@dataclass
class _Learnability:
    """The n checked samples of each valid, well-formed proposal (by proposal index) and the dropped samples."""

    samples: dict[int, list[Solution]]
    dropped: int = 0


class StaleRollouts(RuntimeError):
    """A step's rollouts came from weights older than the step may use (an inference server restarted and not yet
    given the current weights): its episodes are not published; the loop runs the step again."""


class SelfPlayStep:
    """Runs steps of Algorithm 1 against the ports; owns a thread pool for executor calls."""

    def __init__(self, *, run_id: str, store: TripletStore, executor: CodeExecutor, rollouts: Rollouts,
                 episodes: EpisodeQueue, config: StepConfig, executor_parallelism: int = 8,
                 progress: Callable[[str], None] | None = None) -> None:
        """`progress`: a line at each of the step's phases (the run's progress display; default: none)."""
        self.run_id, self.store, self.executor, self.rollouts = run_id, store, executor, rollouts
        self.episodes, self.config = episodes, config
        self.pool = ThreadPoolExecutor(max_workers=executor_parallelism, thread_name_prefix="azr-coordinator")
        self.answers = AnswerHistory()  # answer diversity (App. C.4) over this process's past valid tasks
        self.progress: Callable[[str], None] = progress or (lambda _message: None)

    def close(self) -> None:
        self.pool.shutdown(wait=True, cancel_futures=True)

    def run(self, step: int, policy_version: int, rng: random.Random, *,
            min_version: int | None = None) -> StepResult:
        """One full step; publishes 6·B episodes (fewer where a buffer is empty or the executor failed).
        `min_version`: the oldest weights the step's rollouts may come from (the trainer drops older episodes as
        stale, and a step it can never fill would stall the run); StaleRollouts, nothing published, when any
        rollout is older."""
        timer = PhaseTimer()
        round_ = ProposalRound(store=self.store, executor=self.executor, rollouts=self.rollouts, config=self.config,
                               pool=self.pool, timer=timer)
        B = self.config.batch_size
        # The solve batches' fill from the buffer does not depend on this step's proposals (they go first, the
        # fill is uniform over the rest), so it is drawn now and answered in the proposers' generation: one decode
        # batch instead of two. The answers of fill tasks that this step's tasks displace are not used.
        with timer.phase("store_queue"):
            drawn = {t: self.store.sample_batch(t, B, [], rng) if self.store.count(t) else [] for t in TaskType}
        fills = {t: self._fitting_batch(round_, t, [solve_task_from_entry(e) for e in drawn[t]], rng)
                 for t in TaskType}
        k = self.config.solve_samples_per_task
        # with k > 1 every solve task is answered k times in the solve call (its samples share one prompt)
        rolled = round_.generate_with_answers(tuple(TaskType), B, rng, step=step, policy_version=policy_version,
                                              source=TripletSource.PROPOSED,
                                              solve_tasks=fills if k == 1 else {t: [] for t in TaskType})
        pending = rolled.pending
        verdicts = {t: round_.await_verdicts(pending[t].validations) for t in TaskType}
        # A valid proposal whose solver prompt would not fit is not stored and gets r̄ = 0 (as the authors do).
        too_long = {t: self._unsolvable(round_, t, verdicts[t]) for t in TaskType}
        stored = {t: round_.store_entries(verdicts[t], skip=too_long[t]) for t in TaskType}
        valid = {t: stored[t].entries for t in TaskType}
        new_ids = {t: stored[t].created for t in TaskType}
        complexity = {t: self._measure_tasks(t, verdicts[t], pending[t].contexts) for t in TaskType}
        self.progress(f"step {step}: valid proposals " + ", ".join(f"{t.value} {len(valid[t])}/{len(verdicts[t])}"
                                                                   for t in TaskType)
                      + f"; now {self.config.learnability_samples} learnability samples each and the solve batches, "
                        "in one generation")

        scored = {t: {i: entry for i, entry in valid[t].items() if verdicts[t][i].proposal.format_ok}
                  for t in TaskType}
        batches = {t: self._solve_batch(valid[t], fills[t], rolled.solutions.get(t, []), rng) for t in TaskType}
        # the learnability samples and the solve batch's answers in one generation: one decoding batch, one tail
        learn_generated, solve_generated = self._answer_tasks(scored, batches, seed=rng.getrandbits(31), timer=timer)
        learn_checks = self._learnability_checks(scored, learn_generated)
        solve_checks = self._solve_checks(batches, solve_generated)
        batches_tasks = {t: [slot.task for slot in batches[t] for _ in range(k)] for t in TaskType}

        episodes: list[Episode] = []
        metrics: dict[str, Any] = {"step": step, "policy_version": policy_version}
        learn_answers: dict[TaskType, list[list[str]]] = {}
        solve_answers: dict[TaskType, list[list[str]]] = {}
        for t in TaskType:
            learn = self._await_learnability(learn_checks[t], timer)
            solved = [self._await(check, timer) for group in solve_checks[t] for check in group]
            learn_answers[t] = [[learnability_answer(t, s.text) or "" for s in group]
                                for group in learn.samples.values()]
            solve_answers[t] = [[learnability_answer(t, s.text) or "" for s in solved[i:i + k] if s is not None]
                                for i in range(0, len(solved), k)]
            proposed = self._propose_episodes(step, policy_version, t, verdicts[t], learn, valid[t], too_long[t])
            answered = self._solve_episodes(step, policy_version, t, batches_tasks[t], solved)
            episodes += proposed.episodes + answered.episodes
            checked = [s for s in solved if s is not None]
            metrics[f"valid_rate/{t.value}"] = round(len(valid[t]) / len(verdicts[t]), 6) if verdicts[t] else None
            metrics[f"new/{t.value}"] = len(new_ids[t])
            metrics[f"solve_rate/{t.value}"] = round(sum(bool(s.correct) for s in checked) / len(checked), 6) \
                if checked else None
            rbar = [sum(bool(s.correct) for s in group) / len(group) for group in learn.samples.values() if group]
            metrics[f"learnability/{t.value}"] = round(sum(rbar) / len(rbar), 6) if rbar else None
            metrics[f"dropped/{t.value}/propose"] = proposed.dropped
            metrics[f"dropped/{t.value}/solve"] = answered.dropped
            metrics[f"dropped/{t.value}/learnability"] = learn.dropped
            metrics[f"prompt_over_limit/{t.value}"] = round_.over_limit[t.value]
            metrics.update(counts(f"parse_failures/{t.value}", [v.proposal.parse_failure for v in verdicts[t]]))
            metrics.update(counts(f"format_failures/{t.value}/propose",
                                  [v.proposal.format_failure for v in verdicts[t]]))
            metrics.update(counts(f"format_failures/{t.value}/solve",
                                  [s.parse_failure for s in checked if not s.format_ok]))
            metrics.update(counts(f"exec_status/{t.value}/propose", [v.status for v in verdicts[t]]))
            metrics.update(counts(f"exec_status/{t.value}/solve", [s.exec_status for s in checked]))
        if min_version is not None and (behind := sorted({e.policy_version for e in episodes
                                                          if e.policy_version < min_version})):
            raise StaleRollouts(f"step {step}: rollouts from weight version(s) {behind}, older than {min_version}: "
                                "an inference server has not been given the current weights yet")
        measured = [future.result() for t in TaskType for future in complexity[t]]
        metrics.update({f"task/{name}": round(value, 6) for name, value in aggregate_task_metrics(measured).items()})
        for t in TaskType:  # observed after scoring: each proposal is compared with earlier answers only
            self.answers.observe_all(t, [answer_of(entry) for entry in valid[t].values()])
        with timer.phase("store_queue"):
            self.episodes.publish(episodes)
            for t in TaskType:
                metrics[f"buffer/{t.value}"] = self.store.count(t)
        metrics["valid_proposals"] = sum(v.valid for t in TaskType for v in verdicts[t])
        metrics.update(episode_metrics(episodes))
        metrics.update(collapse_metrics(episodes, learnability_answers=learn_answers, solve_answers=solve_answers))
        metrics.update(timer.breakdown())
        return StepResult(step=step, episodes=episodes, metrics=metrics, new_ids=new_ids)

    # ---------------------------------------------------------------------------------------------------- helpers

    def _unsolvable(self, round_: ProposalRound, task_type: TaskType, verdicts: list[ValidatedProposal]) -> set[int]:
        """Indices of valid proposals whose solver prompt is over the limit."""
        valid = [(i, v.entry) for i, v in enumerate(verdicts) if v.entry is not None]
        fits = round_.fitting_tasks(task_type, [solve_task_from_entry(entry) for _, entry in valid])
        return {index for (index, _), ok in zip(valid, fits) if not ok}

    @staticmethod
    def _fitting_batch(round_: ProposalRound, task_type: TaskType, tasks: list[SolveTask],
                       rng: random.Random) -> list[SolveTask]:
        """The batch without tasks whose prompt is over the limit, filled back to its size with copies of the
        tasks that fit (the authors' upsampling); empty when none fits."""
        fits = round_.fitting_tasks(task_type, tasks)
        kept = [task for task, ok in zip(tasks, fits) if ok]
        if not kept:
            return []
        return kept + [rng.choice(kept) for _ in range(len(tasks) - len(kept))]

    def _solve_batch(self, valid: dict[int, BufferEntry], fill: list[SolveTask], fill_answers: list[Solution],
                     rng: random.Random) -> list[_SolveSlot]:
        """A solver batch of B (§3.3.2): this step's valid tasks first (new or not, each once), then the fill drawn
        before proposing, without the tasks this step already holds; each with its answer when the proposers'
        generation made one (None: still to generate). A buffer that was empty before the step fills the batch with
        copies of the step's tasks, as a draw with replacement from it would."""
        B = self.config.batch_size
        step_tasks = list({entry.id or "": solve_task_from_entry(entry) for entry in valid.values()}.values())[:B]
        held = {task.task_id for task in step_tasks}
        answers: list[Solution | None] = list(fill_answers) if fill_answers else [None] * len(fill)
        rest = [_SolveSlot(task, answer) for task, answer in zip(fill, answers, strict=True)
                if task.task_id not in held]
        batch = [_SolveSlot(task) for task in step_tasks]
        batch += rest[:B - len(batch)]
        if batch:
            batch += [_SolveSlot(rng.choice(step_tasks)) for _ in range(B - len(batch))] if step_tasks else []
        return batch

    def _answer_tasks(self, learn_entries: dict[TaskType, dict[int, BufferEntry]],
                      batches: dict[TaskType, list[_SolveSlot]], *, seed: int, timer: PhaseTimer
                      ) -> tuple[dict[TaskType, list[list[Solution]]], dict[TaskType, list[list[Solution]]]]:
        """n learnability samples of each valid, well-formed proposal and k answers to each solve-batch task that
        still lacks one, as one generation (each sample its own row: rows of one task share its prompt's cache).
        Returns (per type, per proposal in `learn_entries` order: n samples; per type, per task lacking an answer
        in batch order: k answers)."""
        n, k = self.config.learnability_samples, self.config.solve_samples_per_task
        learn = {t: [solve_task_from_entry(entry) for entry in group.values()] for t, group in learn_entries.items()}
        missing = {t: [slot.task for slot in batch if slot.answer is None] for t, batch in batches.items()}
        rows = {t: [task for task in learn.get(t, []) for _ in range(n)]
                + [task for task in missing.get(t, []) for _ in range(k)] for t in TaskType}
        rows = {t: tasks for t, tasks in rows.items() if tasks}
        generated: dict[TaskType, list[list[Solution]]] = {}
        if rows:
            with timer.phase("generation"):
                generated = self.rollouts.solve(rows, self.config.sampling(seed=seed))
        learn_out: dict[TaskType, list[list[Solution]]] = {}
        solve_out: dict[TaskType, list[list[Solution]]] = {}
        for t in TaskType:
            flat = [group[0] for group in generated.get(t, [])]
            cut = len(learn.get(t, [])) * n
            learn_out[t] = [flat[i:i + n] for i in range(0, cut, n)]
            solve_out[t] = [flat[i:i + k] for i in range(cut, len(flat), k)]
        return learn_out, solve_out

    def _solve_checks(self, batches: dict[TaskType, list[_SolveSlot]],
                      generated: dict[TaskType, list[list[Solution]]]
                      ) -> dict[TaskType, list[list[Future[Solution | None]]]]:
        """Start the check of every answer of the solve batches (awaited later): the proposers' generation's
        answer of a slot, or the k generated for it."""
        gold_imports = self.config.induction_gold_imports
        checks: dict[TaskType, list[list[Future[Solution | None]]]] = {}
        for t, batch in batches.items():
            fresh = iter(generated.get(t, []))
            checks[t] = [[self.pool.submit(check_solution, self.executor, t, slot.task, answer,
                                           induction_gold_imports=gold_imports)
                          for answer in ([slot.answer] if slot.answer is not None else next(fresh))]
                         for slot in batch]
        return checks

    def _learnability_checks(self, entries: dict[TaskType, dict[int, BufferEntry]],
                             generated: dict[TaskType, list[list[Solution]]]
                             ) -> dict[TaskType, dict[int, list[_PendingSample]]]:
        """The n samples of each proposal (by index), each checked on its answer whatever its format; a sample whose
        answer repeats an earlier sample's of the same task shares that check (the authors' answer cache)."""
        checks: dict[TaskType, dict[int, list[_PendingSample]]] = {t: {} for t in entries}
        for task_type, group_entries in entries.items():
            for (index, entry), group in zip(group_entries.items(), generated.get(task_type, []), strict=True):
                task = solve_task_from_entry(entry)
                by_answer: dict[str | None, Future[Solution | None]] = {}
                checks[task_type][index] = []
                for solution in group:
                    key = learnability_answer(task_type, solution.text)
                    if key not in by_answer:
                        by_answer[key] = self.pool.submit(
                            check_solution, self.executor, task_type, task, solution, learnability=True,
                            induction_gold_imports=self.config.induction_gold_imports)
                    checks[task_type][index].append(_PendingSample(solution, by_answer[key]))
        return checks

    def _await_learnability(self, checks: dict[int, list[_PendingSample]],
                            timer: PhaseTimer) -> _Learnability:
        learn = _Learnability(samples={})
        for index, pending in checks.items():
            samples = []
            for sample in pending:
                checked = self._await(sample.check, timer)
                if checked is None:
                    learn.dropped += 1
                    continue
                samples.append(sample.solution.model_copy(update={"checked": True, "correct": checked.correct,
                                                           "exec_status": checked.exec_status}))
            learn.samples[index] = samples
        return learn

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
    def _await(future: Future[Solution | None], timer: PhaseTimer) -> Solution | None:
        with timer.phase("executor"):
            return future.result()

    def _episode_id(self, step: int, task_type: TaskType, role: Role, index: int) -> str:
        return f"{self.run_id}/{step}/{task_type.value}/{role.value}/{index}"

    def _propose_episodes(self, step: int, policy_version: int, task_type: TaskType,
                          verdicts: list[ValidatedProposal], learn: _Learnability, stored: dict[int, BufferEntry],
                          unsolvable: Collection[int]) -> _RoleEpisodes:
        """Eq 6 ∘ Eq 4 per proposal. A proposal is dropped when the executor failed on it, or
        on every learnability sample of a valid, well-formed one (its reward is then unknown). An `unsolvable` one
        (its solver prompt is over the limit) has r̄ = 0."""
        episodes, dropped = [], 0
        for index, verdict in enumerate(verdicts):
            proposal = verdict.proposal
            samples = learn.samples.get(index)
            if verdict.dropped or (samples is not None and not samples):
                dropped += 1
                continue
            successes = [False] if index in unsolvable else [bool(s.correct) for s in samples] if samples else None
            reward = propose_reward(successes, well_formed=proposal.format_ok, valid_task=verdict.valid,
                                    unlearnable_reward=self.config.unlearnable_proposal_reward,
                                    extracted=proposal.task is not None,
                                    invalid_task_reward=self.config.proposer_invalid_task_reward)
            episodes.append(Episode(
                id=self._episode_id(step, task_type, Role.PROPOSE, index), run_id=self.run_id, step=step,
                task_type=task_type, role=Role.PROPOSE, prompt_ids=proposal.prompt_ids,
                response_ids=proposal.response_ids, behaviour_logprobs=proposal.behaviour_logprobs or None,
                reward=reward, policy_version=weight_version_int(proposal.weight_version, policy_version),
                text=proposal.text, task_id=stored[index].id if index in stored else None,
                exec_status=verdict.status or proposal.parse_failure, format_ok=proposal.format_ok))
        return _RoleEpisodes(episodes=episodes, dropped=dropped)

    def _solve_episodes(self, step: int, policy_version: int, task_type: TaskType, tasks: list[SolveTask],
                        solved: list[Solution | None]) -> _RoleEpisodes:
        """Eq 6 ∘ Eq 5 per solver answer; an answer the executor failed on is dropped."""
        episodes, dropped = [], 0
        for index, (task, solution) in enumerate(zip(tasks, solved)):
            if solution is None:
                dropped += 1
                continue
            reward = solve_reward(bool(solution.correct), well_formed=solution.format_ok,
                                  wrong_reward=self.config.solver_wrong_answer_reward)
            episodes.append(Episode(
                id=self._episode_id(step, task_type, Role.SOLVE, index), run_id=self.run_id, step=step,
                task_type=task_type, role=Role.SOLVE, prompt_ids=solution.prompt_ids,
                response_ids=solution.response_ids, behaviour_logprobs=solution.behaviour_logprobs or None,
                reward=reward, policy_version=weight_version_int(solution.weight_version, policy_version),
                text=solution.text, task_id=task.task_id,
                exec_status=solution.exec_status or solution.parse_failure, format_ok=solution.format_ok))
        return _RoleEpisodes(episodes=episodes, dropped=dropped)
