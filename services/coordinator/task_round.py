"""One task type's part of a self-play step, filled phase by phase (propose → validate → solve → reward), and the
episodes its rewards make (Eq 6 ∘ Eq 4 for the proposer, Eq 6 ∘ Eq 5 for the solver).

`SelfPlayStep.run` (services/coordinator/step.py) keeps one `TaskTypeRound` per task type instead of one dict per
quantity; each phase fills the fields it computes and the next reads them.
"""

from __future__ import annotations

from collections.abc import Collection
from concurrent.futures import Future
from dataclasses import dataclass, field

from services.algorithm.objectives import propose_reward, solve_reward
from services.algorithm.parsing import learnability_answer
from services.algorithm.task_metrics import TaskMetrics
from services.algorithm.task_types import Role, TaskType
from services.coordinator.step_config import StepConfig
from services.coordinator.step_metrics import counts
from services.json_types import JsonObject
from services.ports import BufferEntry, ProposeContext
from services.records import Episode, Solution, SolveTask
from services.rollouts.validation import ValidatedProposal


def weight_version_int(text: str, fallback: int) -> int:
    """SGLang reports `weight_version` as a string ("default" before any update): our integer, or the fallback."""
    try:
        return int(text)
    except ValueError:
        return fallback


@dataclass(frozen=True)
class RoleEpisodes:
    """One role's episodes of one task type, and how many of its rollouts were dropped (the executor failed)."""

    episodes: list[Episode]
    dropped: int


@dataclass(frozen=True)
class SolveSlot:
    """One task of a solver batch and its answer when the proposers' generation already made one (None: to make)."""

    task: SolveTask
    answer: Solution | None = None


@dataclass(frozen=True)
class PendingSample:
    """A learnability sample and the check of its answer (shared by the samples that give the same answer)."""

    solution: Solution
    check: Future[Solution | None]


@dataclass
class Learnability:
    """The n checked samples of each valid, well-formed proposal (by proposal index) and the dropped samples."""

    samples: dict[int, list[Solution]]
    dropped: int = 0


@dataclass(frozen=True)
class GeneratedAnswers:
    """One generation's answers, per task type: each scored proposal's n learnability samples, and the k answers of
    each solve-batch task that still lacked one."""

    learnability: dict[TaskType, list[list[Solution]]]
    solve: dict[TaskType, list[list[Solution]]]


@dataclass
class TaskTypeRound:
    """What one step holds for one task type, in the order the phases fill it."""

    task_type: TaskType
    fill: list[SolveTask]
    """Propose: the solve batch's draw from the buffer (before this step's proposals), fitting the prompt limit."""
    contexts: list[ProposeContext] = field(default_factory=list)
    """Propose: each proposal's references (or shown program)."""
    fill_answers: list[Solution] = field(default_factory=list)
    """Propose: the answers to `fill` the proposers' generation made (read, not checked); empty when none."""
    validations: list[Future[ValidatedProposal]] = field(default_factory=list)
    """Propose: each proposal's validation, running on the pool."""
    verdicts: list[ValidatedProposal] = field(default_factory=list)
    """Validate: the executor's verdict on each proposal."""
    too_long: set[int] = field(default_factory=set)
    """Validate: valid proposals whose solver prompt is over the limit (not stored; r̄ = 0)."""
    valid: dict[int, BufferEntry] = field(default_factory=dict)
    """Validate: the stored entries by proposal index."""
    new_ids: list[str] = field(default_factory=list)
    """Validate: the ids this step added to the buffer."""
    complexity: list[Future[TaskMetrics]] = field(default_factory=list)
    """Validate: App. C.4 metrics of each valid proposal, computed on the pool."""
    batch: list[SolveSlot] = field(default_factory=list)
    """Solve: the solver batch of B."""
    learn_checks: dict[int, list[PendingSample]] = field(default_factory=dict)
    """Solve: the checks of each scored proposal's learnability samples."""
    solve_checks: list[list[Future[Solution | None]]] = field(default_factory=list)
    """Solve: the checks of each batch task's answers."""
    learn: Learnability = field(default_factory=lambda: Learnability(samples={}))
    """Reward: the checked learnability samples."""
    solved: list[Solution | None] = field(default_factory=list)
    """Reward: each batch answer, checked (None: the executor failed on it)."""
    proposed: RoleEpisodes = field(default_factory=lambda: RoleEpisodes(episodes=[], dropped=0))
    answered: RoleEpisodes = field(default_factory=lambda: RoleEpisodes(episodes=[], dropped=0))

    def scored(self) -> dict[int, BufferEntry]:
        """The valid, well-formed proposals' entries: those whose learnability is estimated."""
        return {i: entry for i, entry in self.valid.items() if self.verdicts[i].proposal.format_ok}

    def batch_tasks(self, samples_per_task: int) -> list[SolveTask]:
        """Each batch task once per answer it gets."""
        return [slot.task for slot in self.batch for _ in range(samples_per_task)]

    def learnability_answers(self) -> list[list[str]]:
        """Each scored proposal's sampled answers, as read (collapse metrics)."""
        return [[learnability_answer(self.task_type, s.text) or "" for s in group]
                for group in self.learn.samples.values()]

    def solve_answers(self, samples_per_task: int) -> list[list[str]]:
        """Each batch task's answers, as read (collapse metrics)."""
        k, solved = samples_per_task, self.solved
        return [[learnability_answer(self.task_type, s.text) or "" for s in solved[i:i + k] if s is not None]
                for i in range(0, len(solved), k)]

    def metrics(self, prompts_over_limit: int) -> JsonObject:
        """The task type's entries of the step's metrics line."""
        t, verdicts, checked = self.task_type.value, self.verdicts, [s for s in self.solved if s is not None]
        rbar = [sum(bool(s.correct) for s in group) / len(group) for group in self.learn.samples.values() if group]
        line: JsonObject = {
            f"valid_rate/{t}": round(len(self.valid) / len(verdicts), 6) if verdicts else None,
            f"new/{t}": len(self.new_ids),
            f"solve_rate/{t}": round(sum(bool(s.correct) for s in checked) / len(checked), 6) if checked else None,
            f"learnability/{t}": round(sum(rbar) / len(rbar), 6) if rbar else None,
            f"dropped/{t}/propose": self.proposed.dropped,
            f"dropped/{t}/solve": self.answered.dropped,
            f"dropped/{t}/learnability": self.learn.dropped,
            f"prompt_over_limit/{t}": prompts_over_limit,
        }
        line.update(counts(f"parse_failures/{t}", [v.proposal.parse_failure for v in verdicts]))
        line.update(counts(f"format_failures/{t}/propose", [v.proposal.format_failure for v in verdicts]))
        line.update(counts(f"format_failures/{t}/solve", [s.parse_failure for s in checked if not s.format_ok]))
        line.update(counts(f"exec_status/{t}/propose", [v.status for v in verdicts]))
        line.update(counts(f"exec_status/{t}/solve", [s.exec_status for s in checked]))
        return line


@dataclass(frozen=True)
class EpisodeIds:
    """Deterministic episode ids (`run/step/type/role/index`): a step run again publishes the same ids."""

    run_id: str
    step: int

    def __call__(self, task_type: TaskType, role: Role, index: int) -> str:
        return f"{self.run_id}/{self.step}/{task_type.value}/{role.value}/{index}"


def propose_episodes(ids: EpisodeIds, policy_version: int, config: StepConfig, task_type: TaskType,
                     verdicts: list[ValidatedProposal], learn: Learnability, stored: dict[int, BufferEntry],
                     unsolvable: Collection[int]) -> RoleEpisodes:
    """Eq 6 ∘ Eq 4 per proposal. A proposal is dropped when the executor failed on it, or on every learnability
    sample of a valid, well-formed one (its reward is then unknown). An `unsolvable` one (its solver prompt is over
    the limit) has r̄ = 0."""
    episodes, dropped = [], 0
    for index, verdict in enumerate(verdicts):
        proposal = verdict.proposal
        samples = learn.samples.get(index)
        if verdict.dropped or (samples is not None and not samples):
            dropped += 1
            continue
        successes = [False] if index in unsolvable else [bool(s.correct) for s in samples] if samples else None
        reward = propose_reward(successes, well_formed=proposal.format_ok, valid_task=verdict.valid,
                                unlearnable_reward=config.unlearnable_proposal_reward,
                                extracted=proposal.task is not None,
                                invalid_task_reward=config.proposer_invalid_task_reward)
        episodes.append(Episode(
            id=ids(task_type, Role.PROPOSE, index), run_id=ids.run_id, step=ids.step,
            task_type=task_type, role=Role.PROPOSE, prompt_ids=proposal.prompt_ids,
            response_ids=proposal.response_ids, behaviour_logprobs=proposal.behaviour_logprobs or None,
            reward=reward, policy_version=weight_version_int(proposal.weight_version, policy_version),
            text=proposal.text, task_id=stored[index].id if index in stored else None,
            exec_status=verdict.status or proposal.parse_failure, format_ok=proposal.format_ok))
    return RoleEpisodes(episodes=episodes, dropped=dropped)


def solve_episodes(ids: EpisodeIds, policy_version: int, config: StepConfig, task_type: TaskType,
                   tasks: list[SolveTask], solved: list[Solution | None]) -> RoleEpisodes:
    """Eq 6 ∘ Eq 5 per solver answer; an answer the executor failed on is dropped."""
    episodes, dropped = [], 0
    for index, (task, solution) in enumerate(zip(tasks, solved)):
        if solution is None:
            dropped += 1
            continue
        reward = solve_reward(bool(solution.correct), well_formed=solution.format_ok,
                              wrong_reward=config.solver_wrong_answer_reward)
        episodes.append(Episode(
            id=ids(task_type, Role.SOLVE, index), run_id=ids.run_id, step=ids.step,
            task_type=task_type, role=Role.SOLVE, prompt_ids=solution.prompt_ids,
            response_ids=solution.response_ids, behaviour_logprobs=solution.behaviour_logprobs or None,
            reward=reward, policy_version=weight_version_int(solution.weight_version, policy_version),
            text=solution.text, task_id=task.task_id,
            exec_status=solution.exec_status or solution.parse_failure, format_ok=solution.format_ok))
    return RoleEpisodes(episodes=episodes, dropped=dropped)
