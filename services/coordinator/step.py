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
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field

from services.algorithm.parsing import learnability_answer
from services.algorithm.task_metrics import AnswerHistory, TaskMetrics, aggregate_task_metrics, task_metrics
from services.algorithm.task_types import TaskType
from services.coordinator.collapse_metrics import collapse_metrics
from services.coordinator.proposal_round import ProposalRound
from services.coordinator.step_config import StepConfig, to_reference
from services.coordinator.step_metrics import PhaseTimer, episode_metrics
from services.coordinator.task_round import (
    EpisodeIds,
    GeneratedAnswers,
    Learnability,
    PendingSample,
    SolveSlot,
    TaskTypeRound,
    propose_episodes,
    solve_episodes,
    weight_version_int,
)
from services.json_types import JsonObject
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
    metrics: JsonObject
    new_ids: dict[TaskType, list[str]] = field(default_factory=dict)


@dataclass(frozen=True)
class RewardedEpisodes:
    """The reward phase's output: every task type's rewarded episodes and the step's metrics line so far."""

    episodes: list[Episode]
    metrics: JsonObject


def answer_of(entry: BufferEntry) -> str:
    """What a solver must produce for an entry, for answer diversity: deduction's output, abduction's input (both
    kept per buffer), induction's outputs joined."""
    if isinstance(entry, InductionTask):
        return " | ".join(entry.outputs)
    return entry.output if entry.buffer is TaskType.DEDUCTION else entry.input


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
        """One full step, propose → validate → solve → reward → publish; publishes 6·B episodes (fewer where a
        buffer is empty or the executor failed). `min_version`: the oldest weights the step's rollouts may come
        from (the trainer drops older episodes as stale, and a step it can never fill would stall the run);
        StaleRollouts, nothing published, when any rollout is older."""
        timer = PhaseTimer()
        round_ = ProposalRound(store=self.store, executor=self.executor, rollouts=self.rollouts, config=self.config,
                               pool=self.pool, timer=timer)
        rounds = self._propose(round_, step, policy_version, rng, timer)
        self._validate(round_, rounds, step)
        self._solve(rounds, rng, timer)
        rewarded = self._reward(round_, rounds, step, policy_version, timer)
        if min_version is not None and (behind := sorted({e.policy_version for e in rewarded.episodes
                                                          if e.policy_version < min_version})):
            raise StaleRollouts(f"step {step}: rollouts from weight version(s) {behind}, older than {min_version}: "
                                "an inference server has not been given the current weights yet")
        metrics = {**rewarded.metrics, **self._publish(rounds, rewarded.episodes, timer)}
        return StepResult(step=step, episodes=rewarded.episodes, metrics=metrics,
                          new_ids={t: rounds[t].new_ids for t in TaskType})

    # ------------------------------------------------------------------------------------------------------ phases

    def _propose(self, round_: ProposalRound, step: int, policy_version: int, rng: random.Random,
                 timer: PhaseTimer) -> dict[TaskType, TaskTypeRound]:
        """Draw each solve batch's fill, then generate the proposals (and, with one answer per task, the fill's
        answers) in one generation; the validations start on the pool."""
        B = self.config.batch_size
        # The solve batches' fill from the buffer does not depend on this step's proposals (they go first, the
        # fill is uniform over the rest), so it is drawn now and answered in the proposers' generation: one decode
        # batch instead of two. The answers of fill tasks that this step's tasks displace are not used.
        with timer.phase("store_queue"):
            drawn = {t: self.store.sample_batch(t, B, [], rng) if self.store.count(t) else [] for t in TaskType}
        rounds = {t: TaskTypeRound(task_type=t, fill=self._fitting_batch(
            round_, t, [solve_task_from_entry(e) for e in drawn[t]], rng)) for t in TaskType}
        k = self.config.solve_samples_per_task
        # with k > 1 every solve task is answered k times in the solve call (its samples share one prompt)
        rolled = round_.generate_with_answers(
            tuple(TaskType), B, rng, step=step, policy_version=policy_version, source=TripletSource.PROPOSED,
            solve_tasks={t: rounds[t].fill if k == 1 else [] for t in TaskType})
        for t, part in rounds.items():
            part.contexts, part.validations = rolled.pending[t].contexts, rolled.pending[t].validations
            part.fill_answers = rolled.solutions.get(t, [])
        return rounds

    def _validate(self, round_: ProposalRound, rounds: dict[TaskType, TaskTypeRound], step: int) -> None:
        """The executor's verdicts; the valid proposals stored (a valid one whose solver prompt would not fit is
        not stored and gets r̄ = 0, as the authors do) and measured (App. C.4)."""
        for part in rounds.values():
            part.verdicts = round_.await_verdicts(part.validations)
        for t, part in rounds.items():
            part.too_long = self._unsolvable(round_, t, part.verdicts)
        for part in rounds.values():
            stored = round_.store_entries(part.verdicts, skip=part.too_long)
            part.valid, part.new_ids = stored.entries, stored.created
        for t, part in rounds.items():
            part.complexity = self._measure_tasks(t, part.verdicts, part.contexts)
        self.progress(f"step {step}: valid proposals "
                      + ", ".join(f"{t.value} {len(part.valid)}/{len(part.verdicts)}" for t, part in rounds.items())
                      + f"; now {self.config.learnability_samples} learnability samples each and the solve batches, "
                        "in one generation")

    def _solve(self, rounds: dict[TaskType, TaskTypeRound], rng: random.Random, timer: PhaseTimer) -> None:
        """The solve batches, then the learnability samples and the batches' missing answers in one generation
        (one decoding batch, one tail); every answer's check starts on the pool."""
        scored = {t: part.scored() for t, part in rounds.items()}
        for part in rounds.values():
            part.batch = self._solve_batch(part.valid, part.fill, part.fill_answers, rng)
        batches = {t: part.batch for t, part in rounds.items()}
        generated = self._answer_tasks(scored, batches, seed=rng.getrandbits(31), timer=timer)
        learn_checks = self._learnability_checks(scored, generated.learnability)
        solve_checks = self._solve_checks(batches, generated.solve)
        for t, part in rounds.items():
            part.learn_checks, part.solve_checks = learn_checks[t], solve_checks[t]

    def _reward(self, round_: ProposalRound, rounds: dict[TaskType, TaskTypeRound], step: int,
                policy_version: int, timer: PhaseTimer) -> RewardedEpisodes:
        """Each task type's checks awaited and its episodes rewarded (Eq 4-6); the step's metrics line so far."""
        ids, k = EpisodeIds(run_id=self.run_id, step=step), self.config.solve_samples_per_task
        episodes: list[Episode] = []
        metrics: JsonObject = {"step": step, "policy_version": policy_version}
        for t, part in rounds.items():
            part.learn = self._await_learnability(part.learn_checks, timer)
            part.solved = [self._await(check, timer) for group in part.solve_checks for check in group]
            part.proposed = propose_episodes(ids, policy_version, self.config, t, part.verdicts, part.learn,
                                             part.valid, part.too_long)
            part.answered = solve_episodes(ids, policy_version, self.config, t, part.batch_tasks(k), part.solved)
            episodes += part.proposed.episodes + part.answered.episodes
            metrics.update(part.metrics(round_.over_limit[t.value]))
        return RewardedEpisodes(episodes=episodes, metrics=metrics)

    def _publish(self, rounds: dict[TaskType, TaskTypeRound], episodes: list[Episode],
                 timer: PhaseTimer) -> JsonObject:
        """The task metrics, the answers seen, the episodes published; the rest of the step's metrics line."""
        k = self.config.solve_samples_per_task
        metrics: JsonObject = {}
        measured = [future.result() for part in rounds.values() for future in part.complexity]
        metrics.update({f"task/{name}": round(value, 6) for name, value in aggregate_task_metrics(measured).items()})
        for t, part in rounds.items():  # observed after scoring: each proposal is compared with earlier answers only
            self.answers.observe_all(t, [answer_of(entry) for entry in part.valid.values()])
        with timer.phase("store_queue"):
            self.episodes.publish(episodes)
            for t in rounds:
                metrics[f"buffer/{t.value}"] = self.store.count(t)
        metrics["valid_proposals"] = sum(v.valid for part in rounds.values() for v in part.verdicts)
        metrics.update(episode_metrics(episodes))
        metrics.update(collapse_metrics(
            episodes, learnability_answers={t: part.learnability_answers() for t, part in rounds.items()},
            solve_answers={t: part.solve_answers(k) for t, part in rounds.items()}))
        metrics.update(timer.breakdown())
        return metrics

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
                     rng: random.Random) -> list[SolveSlot]:
        """A solver batch of B (§3.3.2): this step's valid tasks first (new or not, each once), then the fill drawn
        before proposing, without the tasks this step already holds; each with its answer when the proposers'
        generation made one (None: still to generate). A buffer that was empty before the step fills the batch with
        copies of the step's tasks, as a draw with replacement from it would."""
        B = self.config.batch_size
        step_tasks = list({entry.id or "": solve_task_from_entry(entry) for entry in valid.values()}.values())[:B]
        held = {task.task_id for task in step_tasks}
        answers: list[Solution | None] = list(fill_answers) if fill_answers else [None] * len(fill)
        rest = [SolveSlot(task=task, answer=answer) for task, answer in zip(fill, answers, strict=True)
                if task.task_id not in held]
        batch = [SolveSlot(task=task) for task in step_tasks]
        batch += rest[:B - len(batch)]
        if batch:
            batch += [SolveSlot(task=rng.choice(step_tasks)) for _ in range(B - len(batch))] if step_tasks else []
        return batch

    def _answer_tasks(self, learn_entries: dict[TaskType, dict[int, BufferEntry]],
                      batches: dict[TaskType, list[SolveSlot]], *, seed: int, timer: PhaseTimer
                      ) -> GeneratedAnswers:
        """n learnability samples of each valid, well-formed proposal and k answers to each solve-batch task that
        still lacks one, as one generation (each sample its own row: rows of one task share its prompt's cache).
        Per type: each proposal's n samples in `learn_entries` order, each task lacking an answer's k answers in
        batch order."""
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
        return GeneratedAnswers(learnability=learn_out, solve=solve_out)

    def _solve_checks(self, batches: dict[TaskType, list[SolveSlot]],
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
                             ) -> dict[TaskType, dict[int, list[PendingSample]]]:
        """The n samples of each proposal (by index), each checked on its answer whatever its format; a sample whose
        answer repeats an earlier sample's of the same task shares that check (the authors' answer cache)."""
        checks: dict[TaskType, dict[int, list[PendingSample]]] = {t: {} for t in entries}
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
                    checks[task_type][index].append(PendingSample(solution=solution, check=by_answer[key]))
        return checks

    def _await_learnability(self, checks: dict[int, list[PendingSample]],
                            timer: PhaseTimer) -> Learnability:
        learn = Learnability(samples={})
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
