"""`azr run`: self-play end to end in one process (the embedded profile: SQLite, in-process queue, CPU or CUDA).

Everything lands in one run directory (`runs/<run_id>/`): settings.json, buffers.sqlite3, metrics.jsonl (also as
TensorBoard scalars in tensorboard/, and to W&B when AZR_WANDB=1), checkpoints/. Settings: flags over AZR_* variables
over `--config FILE` over the embedded profile's defaults. Ctrl-C stops at the next step boundary with everything
saved (a second Ctrl-C aborts at once); `azr run --resume runs/<run_id>` continues from the last checkpoint with the
same buffers and step counter. An unknown or absent model, or invalid settings, exit with status 2 before anything
starts.
"""

from __future__ import annotations

import json
import signal
from pathlib import Path
from typing import Annotated, Any

import typer

from azr.cli.exit_codes import bad_input
from azr.cli.settings_options import cli_settings, command_line_values, config_option, setting_option
from services.inference.model_registry import MODEL_HELP
from services.settings import resumed_fields


def _resume_overrides(run_dir: Path) -> dict[str, Any]:
    """The settings a resumed run takes from its settings.json (what each section declares in `RESUMED`: sizes,
    algorithm, and what fixes an update's numbers, its precision and how it is split), unless given again: the
    updates it remakes from the store equal the lost ones bit for bit only under the same settings, on the same CPU,
    with the same thread count (`update_threads`). settings.json is flat, in every version: a run saved before the
    settings had sections resumes the same way."""
    saved_path = run_dir / "settings.json"
    if not saved_path.is_file():
        raise typer.BadParameter(f"{run_dir} has no settings.json: not a run directory", param_hint="--resume")
    saved = json.loads(saved_path.read_text())
    values = {key: saved[key] for key in resumed_fields() if key in saved}
    if "clip_eps" in saved:  # saved before the clip range had two sides: its ε was symmetric
        values.setdefault("clip_ratio_low", saved["clip_eps"])
        values.setdefault("clip_ratio_high", saved["clip_eps"])
    values["run_id"], values["run_root"] = run_dir.name, str(run_dir.parent)
    return values


def run(
    ctx: typer.Context,
    model: Annotated[str | None, setting_option("model", f"{MODEL_HELP}.", profile="embedded")] = None,
    steps: Annotated[int | None, setting_option(
        "steps", "Self-play steps to run now: with --resume, this many more after the recorded ones (`azr "
                 "coordinator --steps` is a total instead).", min=0)] = None,
    run_id: Annotated[str | None, setting_option("run_id", "Name of the run directory under runs/.")] = None,
    batch_size: Annotated[int | None, setting_option("batch_size", "B: tasks per task type and role per step.",
                                                        profile="embedded", min=1)] = None,
    max_response_tokens: Annotated[int | None, setting_option("max_response_tokens", "Longest response, in tokens.",
                                                                 profile="embedded", min=1)] = None,
    seed_file: Annotated[list[Path] | None, typer.Option(
        help="Seed JSONL imported into the buffers first (repeatable; AZR_SEED_FILES takes a JSON list). Default: "
             "the authors' seed triplets shipped with the package.")] = None,
    no_seed_file: Annotated[bool, typer.Option(
        "--no-seed-file", help="Import no seed file: the model seeds its buffers from the zero triplet, as the "
                               "paper does (§3.3.1; slow and nearly empty with a 0.5B model).")] = False,
    resume: Annotated[Path | None, typer.Option(help="Continue the run in this directory (its saved sizes and "
                                                        "algorithm settings, unless given again as flags).")] = None,
    config: Annotated[Path | None, config_option()] = None,
) -> None:
    """Run Absolute Zero self-play (the embedded profile): propose, validate, solve, reward, update — with a live
    progress display."""
    from azr.cli.live_progress import RunDisplay
    from azr.factory.embedded import embedded_database_url, open_embedded_run
    from services.inference.model_registry import resolve_model
    from services.ports import InferenceError

    overrides: dict[str, Any] = _resume_overrides(resume) if resume is not None else {}
    given = command_line_values(ctx, model=model, steps=steps, run_id=run_id, batch_size=batch_size,
                                max_response_tokens=max_response_tokens)
    overrides.update(given)
    if seed_file and no_seed_file:
        raise bad_input("--seed-file and --no-seed-file contradict each other")
    if seed_file:
        overrides["seed_files"] = seed_file
    elif no_seed_file:
        overrides["seed_files"] = []
    settings = cli_settings(config, **overrides)
    if settings.run.profile != "embedded":
        raise bad_input("`azr run` is the embedded profile (AZR_PROFILE or the config file says "
                        f"{settings.run.profile!r}); the distributed one runs as services (`azr coordinator`, "
                        "`azr trainer`, ...: see docs/deploy.md)")
    try:
        resolve_model(settings.inference.model)  # an unknown or absent model is bad input: before anything starts
    except InferenceError as error:
        raise bad_input(str(error)) from None
    settings = settings.with_values(database_url=embedded_database_url(settings))
    saved = settings.save_resolved()
    display = RunDisplay()  # messages, and a live bar (tokens/s, ETA) for every generation batch
    say = display.say
    say(f"run {settings.run.run_id}: settings saved to {saved}")
    try:
        embedded = open_embedded_run(settings, say, on_decode_step=display.decode_step)
    except BaseException:
        display.close()
        raise
    api = embedded.api
    if api is not None:
        say(f"dashboard: {api.url}/dashboard  (buffers {api.url}/v1/buffers, metrics {api.url}/metrics; "
            f"POST {api.url}/v1/seeds with 'Authorization: Bearer' and {api.token_source})")
    interrupted = {"count": 0}

    def on_sigint(*_: object) -> None:
        interrupted["count"] += 1
        if interrupted["count"] > 1:
            raise KeyboardInterrupt
        say("Ctrl-C: stopping after this step (press again to abort now)")
        embedded.loop.request_stop()

    previous = signal.signal(signal.SIGINT, on_sigint)
    try:
        lines = embedded.run()
    finally:
        signal.signal(signal.SIGINT, previous)
        embedded.close()
        display.close()
    say(f"done: {len(lines)} step(s) this session; metrics in {settings.run.run_dir / 'metrics.jsonl'}")
