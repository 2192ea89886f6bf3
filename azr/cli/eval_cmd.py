"""`azr eval cruxeval`: CRUXEval-O (deduction) and CRUXEval-I (abduction) accuracy of a model, greedy, with our
solver prompts and executor checks (services/evaluation).

Prints one line per split to stdout (`CRUXEval-O  accuracy 0.350 (7/20)  format OK 0.900  parse failures 2`) and
writes one JSON line per (row, split) to `--out`: by default `<run_root>/eval/cruxeval-<model>-<UTC time>.jsonl`
(`runs/eval/...` unless AZR_RUN_ROOT says otherwise), so runs never overwrite each other and sit beside the self-play
runs.
Exit codes: 0 done, 2 bad arguments or an unusable data file, model or output path (the reason on stderr).
"""

from __future__ import annotations

import json
import re
import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, TYPE_CHECKING, Annotated

import typer

from azr.cli.choices import EvalSplit
from azr.cli.exit_codes import EXIT_BAD_INPUT
from azr.cli.settings_options import cli_settings, command_line_values, setting_option
from services.inference.model_registry import MODEL_HELP
from services.settings import Settings

if TYPE_CHECKING:
    from services.evaluation.cruxeval import CruxRow, Split

eval_app = typer.Typer(help="Evaluate a model on benchmarks.", no_args_is_help=True)

BAD_INPUT_EXIT = EXIT_BAD_INPUT
"""Exit status for bad arguments or files (the same as a usage error; azr/cli/exit_codes.py)."""


def model_label(model: str) -> str:
    """A file-name-safe name for the model: a registry name as is, a directory by its last component."""
    name = Path(model).name if ("/" in model or Path(model).is_dir()) else model
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name) or "model"


def default_out_path(run_root: Path, model: str, now: datetime) -> Path:
    """`<run_root>/eval/cruxeval-<model>-<YYYYmmddTHHMMSSZ>.jsonl`."""
    return run_root / "eval" / f"cruxeval-{model_label(model)}-{now.strftime('%Y%m%dT%H%M%SZ')}.jsonl"


def refuse(message: str) -> typer.Exit:
    """Print why on stderr; the caller raises the returned Exit (status 2)."""
    typer.echo(f"error: {message}", err=True)
    return typer.Exit(BAD_INPUT_EXIT)


@dataclass(frozen=True)
class EvaluatedPolicy:
    """What answers: an HF model directory, the LoRA checkpoint an adapter-taking engine applies over it, and the
    checkpoint's policy version (recorded on every per-sample row; None for a model that is not a checkpoint)."""

    model_dir: Path
    adapter: Path | None = None
    checkpoint_version: int | None = None


def checkpoint_version(path: Path) -> int | None:
    """The policy version of a run's checkpoint directory (`vNNNNNN`), else None."""
    match = re.fullmatch(r"v(\d{6,})", path.name)
    return int(match.group(1)) if match else None


@contextmanager
def model_directory(model: str, settings: Settings | None = None) -> Iterator[EvaluatedPolicy]:
    """The policy to evaluate: a preset, hub id or model directory as `resolve_model` finds it, or a LoRA run's
    checkpoint (adapters only): with the llama.cpp engine its base plus the adapters, which the engine applies, else
    its base with the adapters merged, written to a temporary directory that lasts the evaluation. Refuses (exit 2)
    what is neither."""
    from services.inference.engine_choice import engine_kind
    from services.inference.model_registry import resolve_model
    from services.ports import InferenceError
    from trainer_svc.lora import BASE_RECORD_FILE, is_adapter_checkpoint, verified_base, write_merged_model

    checkpoint = Path(model).expanduser()
    version = checkpoint_version(checkpoint)
    if not is_adapter_checkpoint(checkpoint):
        try:
            model_dir = resolve_model(model)  # a real model is verified and converted here on first use
        except InferenceError as error:
            raise refuse(str(error)) from None
        yield EvaluatedPolicy(model_dir, checkpoint_version=version)
        return
    if settings is not None and engine_kind(settings.inference, settings.run)[0] == "llama-cpp":
        try:
            base = verified_base(checkpoint, json.loads((checkpoint / BASE_RECORD_FILE).read_text()))
        except (OSError, ValueError) as error:
            raise refuse(f"cannot load the checkpoint {model}: {error}") from None
        typer.echo(f"{model}: LoRA adapters; the llama.cpp engine applies them over their base model", err=True)
        yield EvaluatedPolicy(base, adapter=checkpoint, checkpoint_version=version)
        return
    with tempfile.TemporaryDirectory(prefix="azr-merged-") as merged:
        typer.echo(f"{model}: LoRA adapters; merging them into their base model", err=True)
        try:
            model_dir = write_merged_model(checkpoint, Path(merged))
        except (OSError, ValueError) as error:
            raise refuse(f"cannot load the checkpoint {model}: {error}") from None
        yield EvaluatedPolicy(model_dir, checkpoint_version=version)


@contextmanager
def open_output(path: Path) -> Iterator[IO[str]]:
    """`path` opened for writing before any generation (an unwritable path fails in a second, not after the run),
    and removed again when the evaluation fails, so no empty or partial result file is left behind."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        stream = path.open("w")
    except OSError as error:
        raise refuse(f"cannot write {path}: {error.strerror or error}") from None
    try:
        with stream:
            yield stream
    except BaseException:
        path.unlink(missing_ok=True)
        raise


@eval_app.command("cruxeval")
def cruxeval(
    ctx: typer.Context,
    model: Annotated[str | None, setting_option("model", f"{MODEL_HELP}.")] = None,
    split: Annotated[EvalSplit, typer.Option(help="output (CRUXEval-O = deduction), input (CRUXEval-I = abduction) "
                                                  "or both.")] = EvalSplit.BOTH,
    limit: Annotated[int, typer.Option(help="The first N rows of the file per split; 0 = all.")] = 0,
    data: Annotated[Path | None, setting_option("eval_data", "CRUXEval-format JSONL (code, input, output, id).")
                    ] = None,
    out: Annotated[Path | None, typer.Option(help="Per-sample JSONL (default: "
                                                     "<run_root>/eval/cruxeval-<model>-<UTC time>.jsonl).")] = None,
    batch_size: Annotated[int, typer.Option(help="Prompts decoded together.")] = 32,
    max_response_tokens: Annotated[int | None, setting_option("max_response_tokens",
                                                                 "Longest response, in tokens.")] = None,
    exclude_seeds: Annotated[list[Path] | None, typer.Option(
        help="Leave out rows whose program is in this seed file (repeatable): a held-out probe for a run seeded "
             "from it. Applied before --limit.")] = None,
) -> None:
    """CRUXEval accuracy with our solver prompts (Figs 37-38), greedy decoding, answers judged by the executor."""
    from services.evaluation.cruxeval import EvalDataError, Split
    from services.evaluation.dataset import held_out, load_rows, seed_programs

    if limit < 0:
        raise typer.BadParameter("must be 0 (all rows) or positive", param_hint="--limit")
    if batch_size < 1:
        raise typer.BadParameter("must be at least 1", param_hint="--batch-size")
    if max_response_tokens is not None and max_response_tokens < 1:
        raise typer.BadParameter("must be at least 1", param_hint="--max-response-tokens")
    settings = cli_settings(**command_line_values(ctx, model=model))
    try:
        rows = load_rows(data or settings.observability.eval_data)
        if exclude_seeds:
            kept = held_out(rows, seed_programs(exclude_seeds))
            typer.echo(f"held out: {len(kept)} of {len(rows)} rows (the others' programs are in the seed files)",
                       err=True)
            rows = kept
        rows = rows[:limit] if limit else rows
    except EvalDataError as error:
        raise refuse(str(error)) from None
    if not rows:
        raise refuse("no rows left to evaluate")
    splits = list(Split) if split is EvalSplit.BOTH else [Split(split.value)]
    out_path = out or default_out_path(settings.run.run_root, settings.inference.model, datetime.now(UTC))
    with model_directory(settings.inference.model, settings) as policy, open_output(out_path) as stream:
        evaluate_into(stream, settings, policy, rows, splits, batch_size=batch_size,
                      max_new_tokens=max_response_tokens or settings.rollout.max_response_tokens)
    typer.echo(f"per-sample results: {out_path}", err=True)


def evaluate_into(stream: IO[str], settings: Settings, policy: EvaluatedPolicy, rows: list[CruxRow],
                  splits: list[Split], *, batch_size: int, max_new_tokens: int) -> None:
    """Load the model and the executor, evaluate, print the scores and write the samples to `stream`."""
    from azr.factory.parts import local_executor, rollouts
    from services.compute.torch_threads import threads_beside_executor
    from services.evaluation.runner import run_cruxeval
    from services.inference.engine_choice import build_local_engine
    from services.inference.generation_hooks import NO_HOOKS, GenerationHooks
    from services.ports import InferenceError

    say = lambda message: typer.echo(message, err=True)  # noqa: E731
    began = time.perf_counter()
    workers = settings.executor.executor_workers
    with ExitStack() as closers:
        executor = local_executor(settings, closers)
        # every core while no check runs, the workers' leftover cores while one does (as the embedded run)
        threads = threads_beside_executor(settings.run.torch_threads, workers, executor.jobs_running)
        hooks = NO_HOOKS if threads is None else GenerationHooks(before_forward=threads.before_generation_forward,
                                                                 generation_threads=threads.generation_threads)
        try:
            engine = build_local_engine(policy.model_dir, settings.inference, settings.run, max_batch_rows=batch_size,
                                        say=say, hooks=hooks)
            closers.callback(engine.close)  # a checkpoint's GGUF is the engine's own file: removed with it
            if policy.adapter is not None:
                engine.update_weights(str(policy.adapter), policy.checkpoint_version or 0)
        except InferenceError as error:
            raise refuse(str(error)) from None
        say(f"model {settings.inference.model} loaded ({engine.model_info()['device']}, {engine.prompt_form} "
            f"prompts) in {time.perf_counter() - began:.1f} s; {len(rows)} rows x {len(splits)} split(s), greedy, "
            f"at most {max_new_tokens} tokens")
        report = run_cruxeval(rollouts(settings, closers, engine), executor, rows, splits,
                              max_new_tokens=max_new_tokens, batch_size=batch_size, check_parallelism=workers * 2,
                              progress=say)
    for sample in report.samples:
        stream.write(sample.model_copy(update={"checkpoint_version": policy.checkpoint_version}).model_dump_json()
                     + "\n")
    for split_score in report.scores.values():
        typer.echo(split_score.line())
    say(f"evaluated in {report.seconds:.1f} s ({time.perf_counter() - began:.1f} s with loading)")
