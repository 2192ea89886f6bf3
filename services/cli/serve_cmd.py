"""`azr serve …`: start an HTTP service with uvicorn."""

from __future__ import annotations

from typing import Annotated

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
