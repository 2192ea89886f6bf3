"""`azr serve …`: start an HTTP service with uvicorn: `proposer`, `solver`, `inference`, and `executor-debug` (the
executor's debugging API; the pipeline's executor is the RQ worker `azr worker executor`). Invalid settings, an empty
or placeholder API token (any profile: the token guards every route that runs code or spends inference), or an
unusable model exit with status 2."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, TypeVar

import typer

from azr.cli.exit_codes import bad_input
from azr.cli.settings_options import cli_settings, setting_option
from services.inference.model_registry import MODEL_HELP

Opened = TypeVar("Opened")

serve_app = typer.Typer(help="Start an HTTP service.", no_args_is_help=True)


@serve_app.command("executor-debug")
def serve_executor_debug(
    host: Annotated[str, typer.Option(help="Interface to bind.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to bind.")] = 8003,
) -> None:
    """The executor's debugging API (`POST /v1/execute`, behind AZR_API_TOKEN) over an in-process sandbox pool; not
    part of the pipeline, whose executor jobs `azr worker executor` serves from the RQ queue."""
    from azr.factory.apis import open_executor_debug_api

    settings = cli_settings(production=True)
    with open_executor_debug_api(settings) as api:
        api.serve(host, port)


@serve_app.command("inference")
def serve_inference(
    host: Annotated[str, typer.Option(help="Interface to bind.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to bind (SGLang's default is 30000).")] = 30000,
    model: Annotated[str | None, setting_option("model", f"{MODEL_HELP}.")] = None,
    seed: Annotated[int, typer.Option(help="Sampler seed for requests without sampling_seed.")] = 0,
) -> None:
    """An SGLang-wire-compatible server (/generate, /update_weights_from_disk, ...) over the local engine. With
    AZR_SGLANG_ADMIN_API_KEY set, its control endpoints (pause, update weights, continue) require that key, as SGLang's
    `--admin-api-key` does."""
    from azr.factory.apis import open_inference_server

    settings = cli_settings()
    with starting(lambda: open_inference_server(settings, model=model, seed=seed,
                                                say=lambda line: typer.echo(line, err=True))) as server:
        server.serve(host, port)


def starting(open_process: Callable[[], Opened]) -> Opened:
    """What `open_process` builds (a service's process, its engine); what the settings ask for and this machine
    cannot give (an absent model or package) exits with its reason (status 2), not a traceback."""
    from azr.factory.process import CannotStart

    try:
        return open_process()
    except CannotStart as error:
        raise bad_input(str(error)) from None


INFERENCE_OPTION = typer.Option("--inference/--no-inference",
                                help="Also serve the rollout route with the settings' inference engine (AZR_MODEL, "
                                     "AZR_INFERENCE_BACKEND); --no-inference serves the rest without loading a model.")


@serve_app.command("proposer")
def serve_proposer(
    host: Annotated[str, typer.Option(help="Interface to bind.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to bind.")] = 8001,
    upgrade_db: Annotated[bool | None, typer.Option(
        "--upgrade-db/--no-upgrade-db",
        help="Migrate the database to head first (default: yes when embedded).")] = None,
    inference: Annotated[bool, INFERENCE_OPTION] = True,
) -> None:
    """proposer_api: the buffers, `POST /v1/seeds` and `POST /v1/propose`, over the settings' database, executor
    and inference engine."""
    from azr.factory.apis import open_proposer_api

    settings = cli_settings(production=True)
    migrate = settings.run.profile == "embedded" if upgrade_db is None else upgrade_db
    with starting(lambda: open_proposer_api(settings, migrate=migrate, inference=inference)) as api:
        api.serve(host, port)


@serve_app.command("solver")
def serve_solver(
    host: Annotated[str, typer.Option(help="Interface to bind.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to bind.")] = 8002,
    inference: Annotated[bool, INFERENCE_OPTION] = True,
) -> None:
    """solver_api: `POST /v1/solve` over the settings' inference engine, answers checked by its executor."""
    from azr.factory.apis import open_solver_api

    settings = cli_settings(production=True)
    with starting(lambda: open_solver_api(settings, inference=inference)) as api:
        api.serve(host, port)
