"""`azr run`: self-play end to end in one process (the embedded profile: SQLite, in-process queue, CPU or CUDA).

Everything lands in one run directory (`runs/<run_id>/`): settings.json, buffers.sqlite3, metrics.jsonl,
checkpoints/. Ctrl-C stops at the next step boundary with everything saved (a second Ctrl-C aborts at once);
`azr run --resume runs/<run_id>` continues from the last checkpoint with the same buffers and step counter.
"""

from __future__ import annotations

import json
import signal
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from services.settings import Settings

RESUMED_FROM_FILE = {"run_id", "run_root", "profile", "model", "seed", "batch_size", "max_response_tokens",
                     "max_prompt_tokens", "learnability_samples", "references_k", "induction_inputs", "temperature",
                     "top_p", "learning_rate", "entropy_coef", "clip_eps", "micro_batch_size", "seed_multiplier",
                     "seed_max_rounds", "buffer_cap", "executor_workers", "executor_timeout_s", "device"}
"""Settings a resumed run takes from its saved settings.json (sizes and algorithm), unless given again."""


def _resume_overrides(run_dir: Path) -> dict[str, Any]:
    saved_path = run_dir / "settings.json"
    if not saved_path.is_file():
        raise typer.BadParameter(f"{run_dir} has no settings.json: not a run directory")
    saved = json.loads(saved_path.read_text())
    values = {key: saved[key] for key in RESUMED_FROM_FILE if key in saved}
    values["run_id"], values["run_root"] = run_dir.name, str(run_dir.parent)
    return values


def run(
    model: Annotated[Optional[str], typer.Option(help="qwen-coder-0.5b (default), smollm2, tiny, or an HF dir.")] = None,
    steps: Annotated[Optional[int], typer.Option(help="Self-play steps to run now.")] = None,
    run_id: Annotated[Optional[str], typer.Option(help="Name of the run directory under runs/.")] = None,
    batch_size: Annotated[Optional[int], typer.Option(help="B: tasks per task type and role per step.")] = None,
    max_response_tokens: Annotated[Optional[int], typer.Option(help="Longest response, in tokens.")] = None,
    seed_file: Annotated[Optional[list[Path]], typer.Option(help="Seed JSONL imported into the buffers first "
                                                            "(repeatable).")] = None,
    resume: Annotated[Optional[Path], typer.Option(help="Continue the run in this directory.")] = None,
    profile: Annotated[Optional[str], typer.Option(help="embedded (default).")] = None,
) -> None:
    """Run Absolute Zero self-play: propose, validate, solve, reward, update — with a live progress display."""
    from services.coordinator.embedded import EmbeddedRun, embedded_database_url
    from services.coordinator.prometheus_metrics import CoordinatorMetrics
    from services.coordinator.run_api import start_run_api

    overrides: dict[str, Any] = _resume_overrides(resume) if resume is not None else {}
    given = {"model": model, "steps": steps, "run_id": run_id, "batch_size": batch_size, "profile": profile,
             "max_response_tokens": max_response_tokens, "seed_files": seed_file}
    overrides.update({k: v for k, v in given.items() if v is not None})
    settings = Settings(**overrides)
    if settings.profile != "embedded":
        raise typer.BadParameter("`azr run` is the embedded profile; the distributed one runs as services "
                                 "(`azr coordinator`, `azr trainer`, ...: see the README's Deploy section)")
    settings = settings.model_copy(update={"database_url": embedded_database_url(settings)})
    saved = settings.save_resolved()
    say = lambda message: typer.echo(message, err=True)  # noqa: E731
    say(f"run {settings.run_id}: settings saved to {saved}")
    prometheus = CoordinatorMetrics()
    embedded = EmbeddedRun(settings, progress=say, prometheus=prometheus)
    try:
        api = start_run_api(settings, embedded.store, embedded.executor, prometheus.registry, say)
    except BaseException:
        embedded.close()
        raise
    if api is not None:
        say(f"dashboard: {api.url}/dashboard  (buffers {api.url}/v1/buffers, metrics {api.url}/metrics; "
            f"POST {api.url}/v1/seeds with 'Authorization: Bearer {api.token}')")
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
        if api is not None:
            api.close()
        embedded.close()
    say(f"done: {len(lines)} step(s) this session; metrics in {settings.run_dir / 'metrics.jsonl'}")
