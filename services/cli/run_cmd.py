"""`azr run`: self-play end to end on the resolved profile (embedded by default)."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from services.settings import Settings

SELF_PLAY_NOT_BUILT = 3
"""Exit code while the self-play loop (issue #5) is not built: nothing is faked in its place."""


def run(
    profile: Annotated[Optional[str], typer.Option(help="embedded (default) or distributed.")] = None,
    model: Annotated[Optional[str], typer.Option(help="qwen-coder-0.5b, smollm2, tiny, or an HF directory.")] = None,
    steps: Annotated[Optional[int], typer.Option(help="Self-play steps to run.")] = None,
    run_id: Annotated[Optional[str], typer.Option(help="Name of the run directory under runs/.")] = None,
) -> None:
    """Run Absolute Zero self-play: propose, validate, solve, reward, update."""
    overrides = {"profile": profile, "model": model, "steps": steps, "run_id": run_id}
    settings = Settings(**{k: v for k, v in overrides.items() if v is not None})
    saved = settings.save_resolved()
    typer.echo(f"resolved settings ({settings.profile} profile) saved to {saved}")
    typer.echo(
        "the self-play loop (proposer, solver, trainer) is not built yet: see issue #5. "
        "Nothing was trained.",
        err=True,
    )
    raise typer.Exit(SELF_PLAY_NOT_BUILT)
