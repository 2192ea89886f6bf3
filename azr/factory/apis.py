"""The HTTP services' processes: `azr serve proposer`, `solver`, `inference` and `executor-debug`. Each builder opens
what its app serves (store, executor, engine), builds the app, and returns both with their closers; the command runs
uvicorn on it (`ApiProcess.serve`)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from contextlib import ExitStack
from types import FrameType
from typing import TYPE_CHECKING

from azr.factory import parts
from azr.factory.process import CannotStart, Process
from services.http.ops import ReadinessCheck
from services.ports import InferenceEngine, InferenceError
from services.settings import Settings

if TYPE_CHECKING:
    from fastapi import FastAPI

    from services.inference.engine_choice import Say


class ApiProcess(Process):
    """An HTTP service's app, built and ready to serve, with what it opened. `on_stop` runs (once, in its own thread)
    when the first SIGTERM or Ctrl-C arrives, before uvicorn waits for the open requests: what would keep one of them
    waiting for good (a paused generation) lets go there."""

    def __init__(self, *, app: FastAPI, closers: ExitStack, on_stop: Callable[[], None] | None = None) -> None:
        super().__init__(closers)
        self.app = app
        self.on_stop = on_stop

    def serve(self, host: str, port: int) -> None:
        """Serve the app until uvicorn stops (Ctrl-C, SIGTERM)."""
        import uvicorn

        on_stop = self.on_stop

        class StoppingServer(uvicorn.Server):
            def handle_exit(self, sig: int, frame: FrameType | None) -> None:
                nonlocal on_stop
                if on_stop is not None:  # a thread: a signal handler must not wait on a lock the main thread holds
                    threading.Thread(target=on_stop, name="on-stop", daemon=True).start()
                    on_stop = None
                super().handle_exit(sig, frame)

        StoppingServer(uvicorn.Config(self.app, host=host, port=port)).run()


def api_engine(settings: Settings, closers: ExitStack) -> InferenceEngine:
    """The engine behind `POST /v1/propose` and `POST /v1/solve` (`parts.inference_engine`). With SGLang only the
    served model's tokenizer is loaded, from the directory the model-prep step prepared: nothing is built,
    converted or written, so an API runs on a read-only root with the model volume mounted read-only. CannotStart
    with the reason when the model or a package is missing."""
    try:
        return parts.inference_engine(settings, closers)
    except InferenceError as exc:
        raise CannotStart(f"cannot load the inference engine: {exc}") from None


def redis_checks(settings: Settings) -> dict[str, ReadinessCheck]:
    """`/readyz`'s Redis check when the queues are Redis."""
    if settings.storage.queue_backend != "redis":
        return {}
    import redis

    from services.http.ops import redis_check

    return {"redis": redis_check(redis.Redis.from_url(settings.storage.redis_url, socket_connect_timeout=2,
                                                      socket_timeout=5))}


def open_proposer_api(settings: Settings, *, migrate: bool, inference: bool) -> ApiProcess:
    """proposer_api over the settings' database (migrated to head first when `migrate`), executor and, with
    `inference`, inference engine."""
    from proposer_api.app import create_proposer_app

    with ExitStack() as closers:
        store = closers.enter_context(parts.triplet_store(settings, create=migrate))
        executor = parts.code_executor(settings, closers)
        store.initialise()
        engine = api_engine(settings, closers) if inference else None
        app = create_proposer_app(settings.api, settings.rollout, store, executor, extra_checks=redis_checks(settings),
                                  engine=engine)
        return ApiProcess(app=app, closers=closers.pop_all())


def open_solver_api(settings: Settings, *, inference: bool) -> ApiProcess:
    """solver_api over the settings' inference engine (with `inference`), answers checked by its executor."""
    from solver_api.app import create_solver_app

    with ExitStack() as closers:
        executor = parts.code_executor(settings, closers)
        engine = api_engine(settings, closers) if inference else None
        app = create_solver_app(settings.api, settings.rollout, executor, extra_checks=redis_checks(settings),
                                engine=engine)
        return ApiProcess(app=app, closers=closers.pop_all())


def open_inference_server(settings: Settings, *, model: str | None, seed: int, say: Say) -> ApiProcess:
    """An SGLang-wire-compatible server over the local engine of `model` (default: the settings'); its control
    endpoints need `sglang_admin_api_key` when set. CannotStart when the model or a package is missing."""
    from services.compute.torch_threads import configure_torch_threads
    from services.inference.engine_choice import build_local_engine
    from services.inference.model_registry import resolve_model
    from services.inference.sglang_server import create_inference_app

    configure_torch_threads(settings.run.torch_threads, executor_workers=0)  # this process only generates
    with ExitStack() as closers:
        try:
            engine = build_local_engine(resolve_model(model or settings.inference.model), settings.inference,
                                        settings.run, seed=seed, say=say)
        except InferenceError as exc:  # a missing package or model directory: say which, no traceback
            raise CannotStart(f"azr serve inference: {exc}") from None
        closers.callback(engine.close)
        key = settings.inference.sglang_admin_api_key
        app = create_inference_app(engine, admin_api_key=key.get_secret_value() if key is not None else None)
        # On SIGTERM: abort running generations, refuse waiting ones (a trainer that paused the server and died
        # would otherwise hold its shutdown open for good).
        return ApiProcess(app=app, closers=closers.pop_all(), on_stop=app.state.gate.close)


def open_executor_debug_api(settings: Settings) -> ApiProcess:
    """`POST /v1/execute` (behind the API token) over an in-process sandbox pool."""
    from executor_svc.http_app import create_executor_app

    with ExitStack() as closers:
        executor = parts.local_executor(settings, closers)
        app = create_executor_app(executor, settings.api.api_token, settings.api.max_request_bytes)
        return ApiProcess(app=app, closers=closers.pop_all())
