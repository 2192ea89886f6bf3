"""`azr serve …`: start an HTTP service with uvicorn: `proposer`, `solver`, `inference`, and `executor-debug` (the
executor's debugging API; the pipeline's executor is the RQ worker `azr worker executor`). Invalid settings, an empty
or placeholder API token (any profile: the token guards every route that runs code or spends inference), or an
unusable model exit with status 2."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from azr.cli.exit_codes import bad_input
from azr.cli.settings_options import cli_settings, setting_option
from services.inference.model_registry import MODEL_HELP
from services.settings import Settings

serve_app = typer.Typer(help="Start an HTTP service.", no_args_is_help=True)


@serve_app.command("executor-debug")
def serve_executor_debug(
    host: Annotated[str, typer.Option(help="Interface to bind.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to bind.")] = 8003,
) -> None:
    """The executor's debugging API (`POST /v1/execute`, behind AZR_API_TOKEN) over an in-process sandbox pool; not
    part of the pipeline, whose executor jobs `azr worker executor` serves from the RQ queue."""
    import uvicorn

    from azr.factory import local_executor
    from executor_svc.http_app import create_executor_app

    settings = cli_settings(production=True)
    with local_executor(settings) as executor:
        uvicorn.run(create_executor_app(executor, settings.api_token, settings.max_request_bytes), host=host,
                    port=port)


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
    import uvicorn

    from services.compute.torch_threads import configure_torch_threads
    from services.inference.engine_choice import build_local_engine
    from services.inference.model_registry import resolve_model
    from services.inference.sglang_server import create_inference_app
    from services.ports import InferenceError

    settings = cli_settings()
    configure_torch_threads(settings.torch_threads, executor_workers=0)  # this process only generates
    try:
        engine = build_local_engine(resolve_model(model or settings.model), settings, seed=seed,
                                    say=lambda line: typer.echo(line, err=True))
    except InferenceError as exc:  # a missing package or model directory: say which, no traceback
        raise bad_input(f"azr serve inference: {exc}") from None
    key = settings.sglang_admin_api_key.get_secret_value() if settings.sglang_admin_api_key is not None else None
    uvicorn.run(create_inference_app(engine, admin_api_key=key), host=host, port=port)


def build_inference_engine(settings: Settings) -> Any:
    """The engine behind `POST /v1/propose` and `POST /v1/solve` (azr.factory.inference_engine). With SGLang only
    the served model's tokenizer is loaded, from the directory the model-prep step prepared: nothing is built,
    converted or written, so an API runs on a read-only root with the model volume mounted read-only. A missing model
    or package exits with its reason (status 2), not a traceback."""
    from azr.factory import inference_engine
    from services.ports import InferenceError

    try:
        return inference_engine(settings)
    except InferenceError as exc:
        raise bad_input(f"cannot load the inference engine: {exc}") from None


INFERENCE_OPTION = typer.Option("--inference/--no-inference",
                                help="Also serve the rollout route with the settings' inference engine (AZR_MODEL, "
                                     "AZR_INFERENCE_BACKEND); --no-inference serves the rest without loading a model.")


def _close(*resources: Any) -> None:
    """Close what was opened (engines, executors, stores), skipping what was never built or has no close()."""
    for resource in resources:
        close = getattr(resource, "close", None)
        if close is not None:
            close()


def _redis_checks(settings: Settings) -> dict[str, Any]:
    if settings.queue_backend != "redis":
        return {}
    import redis

    from services.http.ops import redis_check

    return {"redis": redis_check(redis.Redis.from_url(settings.redis_url, socket_connect_timeout=2, socket_timeout=5))}


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
    import uvicorn

    from azr.factory import code_executor, triplet_store
    from proposer_api.app import create_proposer_app

    settings = cli_settings(production=True)
    migrate = settings.profile == "embedded" if upgrade_db is None else upgrade_db
    store = triplet_store(settings, create=migrate)
    executor = code_executor(settings)
    engine = None
    try:
        store.initialise()
        engine = build_inference_engine(settings) if inference else None
        app = create_proposer_app(settings, store, executor, extra_checks=_redis_checks(settings), engine=engine)
        uvicorn.run(app, host=host, port=port)
    finally:
        _close(engine, executor, store)


@serve_app.command("solver")
def serve_solver(
    host: Annotated[str, typer.Option(help="Interface to bind.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to bind.")] = 8002,
    inference: Annotated[bool, INFERENCE_OPTION] = True,
) -> None:
    """solver_api: `POST /v1/solve` over the settings' inference engine, answers checked by its executor."""
    import uvicorn

    from azr.factory import code_executor
    from solver_api.app import create_solver_app

    settings = cli_settings(production=True)
    executor = code_executor(settings)
    engine = None
    try:
        engine = build_inference_engine(settings) if inference else None
        app = create_solver_app(settings, executor, extra_checks=_redis_checks(settings), engine=engine)
        uvicorn.run(app, host=host, port=port)
    finally:
        _close(engine, executor)
