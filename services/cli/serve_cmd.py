"""`azr serve …`: start an HTTP service with uvicorn."""

from __future__ import annotations

from typing import Annotated, Any, Optional

import typer

from services.settings import Settings

serve_app = typer.Typer(help="Start an HTTP service.", no_args_is_help=True)


@serve_app.command("executor")
def serve_executor(
    host: Annotated[str, typer.Option(help="Interface to bind.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to bind.")] = 8003,
) -> None:
    """The executor's debugging API (`POST /v1/execute`) over an in-process sandbox pool."""
    import uvicorn

    from executor_svc.executor import Executor
    from executor_svc.http_app import create_executor_app

    settings = Settings()
    settings.require_production_secrets()
    with Executor.from_settings(settings) as executor:
        uvicorn.run(create_executor_app(executor, settings.max_request_bytes), host=host, port=port)


@serve_app.command("inference")
def serve_inference(
    host: Annotated[str, typer.Option(help="Interface to bind.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to bind (SGLang's default is 30000).")] = 30000,
    model: Annotated[str | None, typer.Option(help="tiny, qwen-coder-0.5b, smollm2 or an HF directory "
                                                   "(default: AZR_MODEL).")] = None,
    seed: Annotated[int, typer.Option(help="Sampler seed for requests without sampling_seed.")] = 0,
) -> None:
    """An SGLang-wire-compatible server (/generate, /update_weights_from_disk, ...) over the local engine."""
    import uvicorn

    from services.inference.local_engine import LocalEngine
    from services.inference.model_registry import resolve_model
    from services.inference.sglang_server import create_inference_app
    from services.ports import InferenceError

    settings = Settings()
    try:
        engine = LocalEngine(resolve_model(model or settings.model), device=settings.device, seed=seed)
    except InferenceError as exc:  # a missing package or model directory: say which, no traceback
        typer.echo(f"azr serve inference: {exc}", err=True)
        raise typer.Exit(2) from exc
    uvicorn.run(create_inference_app(engine), host=host, port=port)


def build_code_executor(settings: Settings) -> Any:
    """The proposer's and solver's executor: RQ jobs when queues are Redis (distributed), else in-process sandboxes."""
    if settings.queue_backend == "redis":
        from executor_svc.rq_client import RQCodeExecutor

        return RQCodeExecutor.from_settings(settings)
    from executor_svc.executor import Executor

    return Executor.from_settings(settings)


def build_inference_engine(settings: Settings) -> Any:
    """The engine behind `POST /v1/propose` and `POST /v1/solve`: SGLang servers (distributed) or the local model.
    A missing model or package exits with its reason (InferenceError), not a traceback."""
    from services.inference.model_registry import resolve_model
    from services.ports import InferenceError

    try:
        model_dir = resolve_model(settings.model)
        if settings.inference_backend == "sglang":
            from services.inference.sglang_client import SGLangClient

            return SGLangClient(settings.sglang_urls, model_dir)
        from services.inference.local_engine import LocalEngine

        return LocalEngine(model_dir, device=settings.device, seed=settings.seed)
    except InferenceError as exc:
        typer.echo(f"cannot load the inference engine: {exc}", err=True)
        raise typer.Exit(2) from exc


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

    from services.http_ops import redis_check

    return {"redis": redis_check(redis.Redis.from_url(settings.redis_url, socket_connect_timeout=2, socket_timeout=5))}


@serve_app.command("proposer")
def serve_proposer(
    host: Annotated[str, typer.Option(help="Interface to bind.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to bind.")] = 8001,
    upgrade_db: Annotated[Optional[bool], typer.Option(
        "--upgrade-db/--no-upgrade-db", help="Migrate the database to head first (default: yes when embedded).")] = None,
    inference: Annotated[bool, INFERENCE_OPTION] = True,
) -> None:
    """proposer_api: the buffers, `POST /v1/seeds` and `POST /v1/propose`, over the settings' database, executor
    and inference engine."""
    import uvicorn

    from proposer_api.app import create_proposer_app
    from services.store import open_store

    settings = Settings()
    settings.require_production_secrets()
    migrate = settings.profile == "embedded" if upgrade_db is None else upgrade_db
    store = open_store(settings.database_url, buffer_cap=settings.buffer_cap, create=migrate)
    executor = build_code_executor(settings)
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

    from solver_api.app import create_solver_app

    settings = Settings()
    settings.require_production_secrets()
    executor = build_code_executor(settings)
    engine = None
    try:
        engine = build_inference_engine(settings) if inference else None
        app = create_solver_app(settings, executor, extra_checks=_redis_checks(settings), engine=engine)
        uvicorn.run(app, host=host, port=port)
    finally:
        _close(engine, executor)
