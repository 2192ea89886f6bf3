"""The Executor: validation of proposals and checks of answers over two pools of sandbox workers (docs/design.md §5).

Every run of model text happens in a worker (never in this process, which only parses it for the static check).
Two pools: gold workers run with PYTHONHASHSEED=0, so a program's gold output is the same on any worker and after
any restart; verify workers run with another fixed seed and repeat each validation run in a separate fresh process,
which catches programs whose output depends on hash order (paper §3.3.3, j = 2). Answer checks run on gold workers.

Decisions:
- `no_return`: a proposal whose `f` returns None (for any of its inputs) is invalid: a task needs a value to reason
  about. Answer checks compare None like any other value.
- The second (verify) run must succeed with the identical repr; if it times out or runs out of memory that status is
  reported, any other difference is `nondeterministic`.
- A worker lost during a request is replaced and the request retried once; lost again -> `crashed`. A worker that
  cannot start -> `sandbox_error`. See worker_pool.py.
- Verdicts are made here, never in a sandbox, and the gold value never enters one (executor_svc/verdicts.py: both
  sides read as literals, compared with `==`). Deduction runs nothing at all: the answer is read as a literal.
  Abduction must run f(answer): the paper's check is `gold == f(answer)`, and that call is the one it forces. A
  literal answer is built in the sandbox before the program runs (`args_mode` "literal"); an answer that needs the
  program's own names (a class instance of the program, a namedtuple, a lambda, an iterator, as a gold input may)
  passes the static answer rules and is evaluated with the program's functions and classes only (`restricted`).
  Induction runs the agent's program on every hidden input (it gets the static program check first), after the gold
  program's import statements when the caller passes them (the released code's check; `induction_gold_imports`).
  What comes back from a sandbox is only each run's reported repr.
"""

from __future__ import annotations

import ast
import functools
import os
import sys
import time
import weakref
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Concatenate, Literal, ParamSpec, TypeVar

from executor_svc import verdicts, worker_messages
from executor_svc.errors import ExecutorClosed, SandboxUnavailable, WorkerCrashed
from executor_svc.literals import NotALiteral, read_arguments
from executor_svc.process_backend import ProcessBackend, SandboxMode
from executor_svc.prometheus_metrics import ExecutorMetrics
from executor_svc.unconfined_log import NOT_ISOLATED
from executor_svc.worker_messages import JobResult
from executor_svc.worker_pool import ChannelFactory, WorkerPool
from services.algorithm import static_check, thread_safe_ast
from services.execution import CheckResult, ExecStatus, ExecutionLimits, InductionValidationResult, ValidationResult
from services.settings import ExecutorSettings

GOLD_HASH_SEED = 0
VERIFY_HASH_SEED = 1  # differs from seed 0 on the set orders the tests probe; fixed so verdicts are reproducible
DEFAULT_PYTHON = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable
T = TypeVar("T")
P = ParamSpec("P")
R = TypeVar("R", ValidationResult, InductionValidationResult, CheckResult)


@dataclass(frozen=True)
class ExecutorConfig:
    """What an in-process Executor is built from (the executor section, `ExecutorSettings`)."""

    backend: Literal["process", "docker"]
    workers: int  # per pool (gold, verify)
    limits: ExecutionLimits
    sandbox: SandboxMode  # process backend
    python: str  # process backend: the workers' interpreter
    recycle_after: int
    docker_image: str  # docker backend

    @classmethod
    def from_settings(cls, settings: ExecutorSettings) -> ExecutorConfig:
        limits = ExecutionLimits(timeout_s=settings.executor_timeout_s, memory_mb=settings.executor_memory_mb,
                                 max_output_bytes=settings.executor_max_output_bytes,
                                 max_processes=settings.executor_max_processes)
        return cls(backend=settings.executor_backend, workers=settings.executor_workers, limits=limits,
                   sandbox=settings.executor_sandbox, python=settings.executor_python,
                   recycle_after=settings.executor_recycle_after, docker_image=settings.executor_docker_image)


class _RunFailed(Exception):
    """A request got no job results: its worker crashed twice, or the sandbox is broken."""

    def __init__(self, status: ExecStatus, error: str) -> None:
        super().__init__(error)
        self.status, self.error = status, error


def _ms(started: float) -> float:
    return round((time.perf_counter() - started) * 1000, 3)


def _short(text: str | None, limit: int = 80) -> str:
    text = "None" if text is None else text
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _recorded(kind: str) -> Callable[[Callable[Concatenate[Executor, P], R]], Callable[Concatenate[Executor, P], R]]:
    """Count an operation's verdict and latency in the executor's metrics (when it has any), at its one exit."""

    def decorate(operation: Callable[Concatenate[Executor, P], R]) -> Callable[Concatenate[Executor, P], R]:
        @functools.wraps(operation)
        def recorded(self: Executor, *args: P.args, **kwargs: P.kwargs) -> R:
            result = operation(self, *args, **kwargs)
            self._note_health(result.status, result.error)
            if self.metrics is not None:
                self.metrics.observe(kind, result.status.value, result.ms / 1000.0)
            return result

        return recorded

    return decorate


class Executor:
    """Sandboxed executor (implements services.ports.CodeExecutor); thread-safe; close() it (or use `with`)."""

    def __init__(self, *, workers: int = 2, limits: ExecutionLimits | None = None, sandbox: SandboxMode = "auto",
                 python: str | None = None, recycle_after: int = 1000, channel_factory: ChannelFactory | None = None,
                 isolation: str | None = None, verify_hash_seed: int = VERIFY_HASH_SEED,
                 metrics: ExecutorMetrics | None = None) -> None:
        """`channel_factory` plugs in another backend (docker); the executor owns it and calls its close(), if any,
        on close. Otherwise a process backend is built from `sandbox` ("auto" | "bwrap" | "none") and `python`
        (absolute interpreter path for the workers): "auto" is bubblewrap, else the rootless namespace sandbox, else a
        refusal (SandboxUnavailable, with the command that installs bubblewrap); "none" only when asked. Starts all
        2 x `workers` workers and runs the zero triplet before returning.
        With `metrics`, every operation's status and latency is recorded there."""
        self.metrics = metrics
        if verify_hash_seed == GOLD_HASH_SEED:
            raise ValueError("the verify hash seed must differ from the gold seed")
        if workers < 1 or recycle_after < 1:
            raise ValueError("workers and recycle_after must be >= 1")
        self.limits = limits or ExecutionLimits()
        self._backend: ChannelFactory = (channel_factory if channel_factory is not None
                                         else ProcessBackend(python or DEFAULT_PYTHON, sandbox))
        self._isolation: str = isolation or str(getattr(self._backend, "isolation", "custom"))
        self._gold = WorkerPool(self._backend, hash_seed=GOLD_HASH_SEED, size=workers, recycle_after=recycle_after)
        self._verify = WorkerPool(self._backend, hash_seed=verify_hash_seed, size=workers,
                                  recycle_after=recycle_after)
        self._threads = ThreadPoolExecutor(max_workers=2 * workers, thread_name_prefix="azr-executor")
        self._finalizer = weakref.finalize(self, _shutdown, self._threads, (self._gold, self._verify), self._backend)
        self._health: str | None = None
        try:
            self._gold.start()
            self._verify.start()
            if self._gold.str_hash == self._verify.str_hash:
                raise SandboxUnavailable("gold and verify workers hash strings alike: hash seeds are not effective")
            status, error, _, _ = self._validate_runs("def f(x):\n    return x", ["'Hello World'"])  # not counted
            if status is not ExecStatus.OK:
                self._health = f"sandbox fails the zero triplet: {status} {error or ''}"
        except BaseException:
            self.close()
            raise

    @classmethod
    def from_settings(cls, settings: ExecutorSettings, metrics: ExecutorMetrics | None = None) -> Executor:
        """Build from the executor section (see `from_config`)."""
        return cls.from_config(ExecutorConfig.from_settings(settings), metrics)

    @classmethod
    def from_config(cls, config: ExecutorConfig, metrics: ExecutorMetrics | None = None) -> Executor:
        """The process backend, or for `backend="docker"` an `executor_svc.docker_backend.DockerBackend` (a callable
        hash_seed -> WorkerChannel with an `isolation` label and a `close()` that the executor calls when it closes).
        """
        common: dict[str, Any] = {"workers": config.workers, "limits": config.limits,
                                  "recycle_after": config.recycle_after, "metrics": metrics}
        if config.backend == "docker":
            from executor_svc.docker_backend import DockerBackend  # the docker backend's own module (docker SDK)

            factory = DockerBackend(image=config.docker_image, memory_mb=config.limits.memory_mb,
                                    max_processes=config.limits.max_processes)
            return cls(channel_factory=factory, isolation=factory.isolation, **common)
        if config.backend != "process":
            raise ValueError(f"unknown executor_backend {config.backend!r}")
        return cls(sandbox=config.sandbox, python=config.python, **common)

    # ------------------------------------------------------------------------------------------------ lifecycle

    @property
    def isolation(self) -> str:
        """Which isolation the workers run under: "bwrap", "rootless", "docker", "none" (for /readyz)."""
        return self._isolation

    def stats(self) -> dict[str, dict[str, int]]:
        """Worker counters per pool: started, lost, recycled, requests."""
        return {"gold": vars(self._gold.stats).copy(), "verify": vars(self._verify.stats).copy()}

    def jobs_running(self) -> int:
        """Sandbox workers running generated code now, over both pools (what `SharedCoreThreads` watches)."""
        return self._gold.busy_workers() + self._verify.busy_workers()

    def worker_pids(self) -> dict[str, list[int]]:
        """Host pids of the live workers per pool (for operators and tests)."""
        return {"gold": self._gold.worker_pids(), "verify": self._verify.worker_pids()}

    def readiness_problem(self) -> str | None:
        """None when the sandbox works, else what went wrong: the zero triplet's result at start, then the last
        infrastructure fault of a real request (cleared by the next request that reached a worker). Cached state
        only: a readiness probe (unauthenticated, possibly a flood of them) never runs a sandbox job."""
        if not self._finalizer.alive:
            return "the executor is closed"
        return self._health

    def isolation_note(self) -> str | None:
        """For /readyz: what a client must know about the isolation (an unsandboxed executor), else None."""
        return NOT_ISOLATED if self._isolation == "none" else None

    def _note_health(self, status: ExecStatus, error: str | None) -> None:
        """Track infrastructure faults for readiness_problem (any other status means a worker answered)."""
        if status is ExecStatus.SANDBOX_ERROR:
            self._health = f"sandbox error: {error or 'unknown'}"
        else:
            self._health = None

    def close(self) -> None:
        """Finish requests in flight, then stop every worker and the backend. Idempotent."""
        self._finalizer()

    def __enter__(self) -> Executor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------------------------------------ operations

    @_recorded("validate_proposal")
    def validate_proposal(self, program: str, input: str) -> ValidationResult:
        """Static check, then f(input) under seed 0 (gold output) and again under the verify seed."""
        started = time.perf_counter()
        verdict = static_check.check_program(program)
        if verdict.passed:
            argument = static_check.check_arguments(input)
            verdict = verdict if argument.passed else static_check.StaticVerdict(
                argument.status, argument.error, verdict.imports)
        if not verdict.passed:
            return ValidationResult(status=verdict.status, error=verdict.error, imports=verdict.imports,
                                    ms=_ms(started))
        status, error, outputs, _ = self._validate_runs(program, [input])
        output = outputs[0] if outputs else None
        return ValidationResult(status=status, output=output, error=error, imports=verdict.imports, ms=_ms(started))

    @_recorded("validate_induction")
    def validate_induction(self, program: str, inputs: Sequence[str]) -> InductionValidationResult:
        """Every input must validate; the first that does not invalidates the proposal (`failed_index`)."""
        started = time.perf_counter()
        if not inputs:
            return InductionValidationResult(status=ExecStatus.SYNTAX_ERROR, error="no inputs", ms=_ms(started))
        verdict = static_check.check_program(program)
        if not verdict.passed:
            return InductionValidationResult(status=verdict.status, error=verdict.error, ms=_ms(started))
        for index, text in enumerate(inputs):
            argument = static_check.check_arguments(text)
            if not argument.passed:
                return InductionValidationResult(status=argument.status, error=f"input {index}: {argument.error}",
                                                 failed_index=index, ms=_ms(started))
        status, error, outputs, failed = self._validate_runs(program, list(inputs))
        return InductionValidationResult(status=status, outputs=outputs, error=error, failed_index=failed,
                                         ms=_ms(started))

    @_recorded("check_deduction")
    def check_deduction(self, gold_output: str, agent_output: str) -> CheckResult:
        """Is the answer the gold value? Both read as literals here; nothing runs (executor_svc/verdicts.py)."""
        started = time.perf_counter()
        verdict = static_check.check_answer_value(agent_output)
        if verdict.status is ExecStatus.FORBIDDEN:
            return CheckResult(status=verdict.status, correct=False, error=verdict.error, ms=_ms(started))
        outcome = verdicts.compare(gold_output, agent_output)
        if outcome.equal:
            return CheckResult(status=ExecStatus.OK, correct=True, ms=_ms(started))
        status = ExecStatus.SYNTAX_ERROR if verdict.status is ExecStatus.SYNTAX_ERROR else ExecStatus.WRONG_ANSWER
        return CheckResult(status=status, correct=False, error=verdict.error or outcome.reason, ms=_ms(started))

    @_recorded("check_abduction")
    def check_abduction(self, program: str, gold_output: str, agent_input: str) -> CheckResult:
        """gold == f(answer): f runs in the sandbox on the answer (a literal built before the program runs, else an
        expression under the answer rules with the program's own names only); the outputs are compared here."""
        started = time.perf_counter()
        verdict = static_check.check_program(program)
        if not verdict.passed:
            return CheckResult(status=verdict.status, correct=False, error=verdict.error, ms=_ms(started))
        try:
            read_arguments(agent_input)
            mode: worker_messages.ArgsMode = "literal"
        except NotALiteral:
            answer = static_check.check_arguments(agent_input, answer=True)
            if not answer.passed:
                return CheckResult(status=answer.status, correct=False, error=answer.error, ms=_ms(started))
            mode = "restricted"
        return self._check([worker_messages.call_job(program, agent_input, mode)], [gold_output], started)

    @_recorded("check_induction")
    def check_induction(self, agent_program: str, inputs: Sequence[str], outputs: Sequence[str],
                        gold_imports: Sequence[str] = ()) -> CheckResult:
        """The agent's program must map every hidden input to its gold output. ``gold_imports``: the gold program's
        import statements, run before the agent's program (the released code's check), so a hidden input or the
        program may use an imported name the agent did not import itself; empty, the program runs as written."""
        started = time.perf_counter()
        if len(inputs) != len(outputs) or not inputs:
            raise ValueError(f"need as many outputs as inputs (at least one), got {len(inputs)} and {len(outputs)}")
        agent_program = with_imports(gold_imports, agent_program)
        verdict = static_check.check_program(agent_program)
        if not verdict.passed:
            return CheckResult(status=verdict.status, correct=False, error=verdict.error, ms=_ms(started))
        jobs = [worker_messages.call_job(agent_program, text) for text in inputs]
        return self._check(jobs, list(outputs), started)

    # -------------------------------------------------------------------------------------------------- batches

    def validate_many(self, items: Iterable[tuple[str, str]]) -> list[ValidationResult]:
        """validate_proposal over (program, input) pairs, in parallel over the pool; results in input order."""
        return self._map(self.validate_proposal, items)

    def validate_induction_many(self, items: Iterable[tuple[str, Sequence[str]]]) -> list[InductionValidationResult]:
        return self._map(self.validate_induction, items)

    def check_deduction_many(self, items: Iterable[tuple[str, str]]) -> list[CheckResult]:
        return self._map(self.check_deduction, items)

    def check_abduction_many(self, items: Iterable[tuple[str, str, str]]) -> list[CheckResult]:
        return self._map(self.check_abduction, items)

    def check_induction_many(self, items: Iterable[tuple[str, Sequence[str], Sequence[str]]]) -> list[CheckResult]:
        return self._map(self.check_induction, items)

    def _map(self, operation: Callable[..., T], items: Iterable[tuple[object, ...]]) -> list[T]:
        if not self._finalizer.alive:
            raise ExecutorClosed("the executor is closed")
        return list(self._threads.map(lambda arguments: operation(*arguments), items))

    # -------------------------------------------------------------------------------------------------- helpers

    def _run(self, pool: WorkerPool, jobs: Sequence[worker_messages.Job], stop_on_failure: bool) -> list[JobResult]:
        message = worker_messages.run_message(jobs, self.limits, stop_on_failure)
        try:
            reply = pool.request(message, worker_messages.reply_timeout_s(self.limits, len(jobs)), jobs=len(jobs))
            return worker_messages.read_results(reply, len(jobs), stop_on_failure)
        except WorkerCrashed as exc:
            raise _RunFailed(ExecStatus.CRASHED, str(exc)) from exc
        except ExecutorClosed:
            raise
        except SandboxUnavailable as exc:
            raise _RunFailed(ExecStatus.SANDBOX_ERROR, str(exc)) from exc

    def _validate_runs(self, program: str, inputs: list[str]) -> tuple[ExecStatus, str | None, list[str] | None,
                                                                       int | None]:
        """(status, error, outputs, failed_index) of the gold runs and their verify re-runs."""
        jobs = [worker_messages.call_job(program, text) for text in inputs]
        try:
            gold = self._run(self._gold, jobs, stop_on_failure=True)
            for index, result in enumerate(gold):
                if result.status is not ExecStatus.OK:
                    return result.status, result.error, None, index
                if result.none:
                    return ExecStatus.NO_RETURN, "f returned None: a task needs a value", None, index
            verify = self._run(self._verify, jobs, stop_on_failure=False)
        except _RunFailed as failed:
            return failed.status, failed.error, None, None
        for index, (first, second) in enumerate(zip(gold, verify)):
            if second.status in (ExecStatus.TIMEOUT, ExecStatus.MEMORY):
                return second.status, f"on the second run: {second.error}", None, index
            if second.status is not ExecStatus.OK or second.output != first.output:
                again = second.output if second.status is ExecStatus.OK else f"{second.status}: {second.error}"
                error = (f"hash seed {GOLD_HASH_SEED} gave {_short(first.output)}, "
                         f"hash seed {self._verify.hash_seed} gave {_short(again)}")
                return ExecStatus.NONDETERMINISTIC, error, None, index
        return ExecStatus.OK, None, [result.output or "" for result in gold], None

    def _check(self, jobs: Sequence[worker_messages.Job], golds: Sequence[str], started: float) -> CheckResult:
        """Run `jobs` on gold workers; each reported output must be its gold value (compared here, not there)."""
        try:
            results = self._run(self._gold, jobs, stop_on_failure=True)
        except _RunFailed as failed:
            return CheckResult(status=failed.status, correct=False, error=failed.error, ms=_ms(started))
        for index, (result, gold) in enumerate(zip(results, golds)):
            where = f"pair {index}: " if len(jobs) > 1 else ""
            fits = len(gold.encode("utf-8", "surrogatepass")) <= self.limits.max_output_bytes
            if result.status is ExecStatus.OUTPUT_TOO_LARGE and fits:  # it ran; it cannot be the gold value
                return CheckResult(status=ExecStatus.WRONG_ANSWER, correct=False,
                                   error=where + f"f gave an output over the limit, the gold output fits in it: "
                                                 f"{result.error}", ms=_ms(started))
            if result.status is not ExecStatus.OK:
                return CheckResult(status=result.status, correct=False, error=where + (result.error or ""),
                                   ms=_ms(started))
            outcome = verdicts.compare(gold, result.output if result.output is not None else "")
            if not outcome.equal:
                return CheckResult(status=ExecStatus.WRONG_ANSWER, correct=False,
                                   error=where + f"f gave {_short(result.output)}: {outcome.reason}", ms=_ms(started))
        return CheckResult(status=ExecStatus.OK, correct=True, ms=_ms(started))


def with_imports(imports: Sequence[str], program: str) -> str:
    """``program`` after the import statements ``imports`` (one per line, as the static check lists a program's
    imports), as the released code's induction check builds it; ValueError for a line that is not one import."""
    for line in imports:
        try:
            body = thread_safe_ast.parse(line).body
        except SyntaxError:
            body = []
        if len(body) != 1 or not isinstance(body[0], ast.Import | ast.ImportFrom):
            raise ValueError(f"not one import statement: {line!r}")
    return "\n".join([*imports, program]) if imports else program


def _shutdown(threads: ThreadPoolExecutor, pools: tuple[WorkerPool, ...], backend: object) -> None:
    """Close everything an Executor owns (also run by its finalizer when it is garbage-collected unclosed)."""
    threads.shutdown(wait=True, cancel_futures=True)
    for pool in pools:
        pool.close()
    close = getattr(backend, "close", None)
    if callable(close):
        close()
