"""`azr warmup`: the format warm-up switch (trainer_svc/format_warmup.py) written as a snapshot a run starts from.

    azr warmup --config configs/selfplay-cpu.toml --out ~/azr-runs/selfplay-cpu-warmup.safetensors --per-type 8
    # then the run: lora_init_adapter = that file (configs/selfplay-cpu.toml names it)
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from azr.cli.exit_codes import bad_input
from azr.cli.settings_options import cli_settings, command_line_values, config_option, setting_option


def warmup(
    ctx: typer.Context,
    out: Annotated[Path, typer.Option(help="The snapshot file to write (safetensors; one file).")],
    per_type: Annotated[int, typer.Option(min=1, help="Examples per proposer kind (deduction, abduction, "
                                                      "induction).")] = 8,
    epochs: Annotated[int, typer.Option(min=1, help="Passes over the examples.")] = 2,
    model: Annotated[str | None, setting_option("model", "Base model (a preset name or an HF directory).")] = None,
    config: Annotated[Path | None, config_option()] = None,
) -> None:
    """The format warm-up apart from a run (a run with `format_warmup_per_type` > 0 makes its own): a supervised
    pass of LoRA adapters over the authors' seed triplets written as well-formed proposals (never CRUXEval), a switch
    for a model that writes almost no valid task at step 0. Uses the run's settings: model, LoRA rank/alpha/targets,
    learning rate, references K, induction inputs, prompt budget, seed files and seed. Writes the adapters as a
    snapshot (origin "format-warmup") and, beside it, the examples it learned from (`<out>.examples.jsonl`)."""
    from azr.factory.parts import warmup_plan
    from services.inference.model_registry import resolve_model
    from trainer_svc.format_warmup import warm_up
    from trainer_svc.lora import add_adapters
    from trainer_svc.resume import load_model_and_tokenizer

    settings = cli_settings(config, **command_line_values(ctx, model=model))
    if settings.trainer.lora.lora_rank == 0:
        raise bad_input("the warm-up trains LoRA adapters: set lora_rank > 0 (the run it prepares must use LoRA)")
    model_dir = resolve_model(settings.inference.model)
    policy, _ = load_model_and_tokenizer(model_dir)
    policy = add_adapters(policy, settings.trainer.lora, model_dir)
    plan = warmup_plan(settings, per_type=per_type, epochs=epochs)
    try:
        warm_up(policy, model_dir, plan, settings.trainer, out, say=typer.echo)
    except ValueError as error:
        raise bad_input(str(error)) from None
    typer.echo(f"set lora_init_adapter to {out} to start a run from it")
