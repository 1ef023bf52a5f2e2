"""``create_app(store, settings)``: the ASGI application, with everything it uses passed in."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.middleware.gzip import GZipMiddleware
from starlette.responses import Response

from ..errors import JobpulseError
from ..ingest import Committer
from ..insights.service import Insights
from ..settings import Settings
from ..store import Store
from ..version import __version__
from . import docs_pages
from .access import Access
from .context import Context, FileStore
from .headers import SecurityHeaders
from .metrics import Readiness, RequestMetrics, server_metrics
from .responses import error_response
from .routes import files, health, ingest, insights, jobs, keys, logs, scalars, sdk, session, system
from .signing import Signer

log = logging.getLogger("jobpulse.server")

# (does this request belong to the family?, render(status, code, message, field) -> response)
ErrorShape = tuple[Callable[[Request], bool], Callable[[int, str, str, str | None], Response]]


def create_app(
    store: Store, settings: Settings, *, extensions: list[Callable[[FastAPI], None]] | None = None
) -> FastAPI:
    """The jobpulse server over ``store``: the native API, the compatible APIs and the web UI."""
    app = FastAPI(
        title="jobpulse",
        version=__version__,
        description="Telemetry for ML training jobs. Native API under /jp/v1; see docs/ for the "
        "ingest format and the compatible APIs.",
        docs_url=None,  # /docs and /redoc: docs_pages, from local assets
        redoc_url=None,
        openapi_url="/openapi.json",
        lifespan=_lifespan,
    )
    signer = Signer(store.state.secret())
    metrics = server_metrics(store, settings)
    committer = Committer(store.writer, observer=metrics)
    if metrics is not None:
        metrics.watch(committer)
    app.state.ctx = Context(
        store=store,
        settings=settings,
        signer=signer,
        access=Access(store, settings, signer),
        committer=committer,
        files=FileStore(store.files, settings.files_dir),
        readiness=Readiness(store.engine, settings.readiness_timeout_ms / 1000),
        metrics=metrics,
    )
    app.state.insights = Insights(store, settings)  # evaluates running jobs from startup to shutdown (_lifespan)
    app.state.error_shapes = []
    # Chart and heat-map answers are large, repetitive JSON; event streams are left uncompressed. Level 1: a
    # 1,000-bucket chart (100 KB) compressed in 0.7 ms instead of 2.9 ms at level 5, 44 KB instead of 39 KB.
    app.add_middleware(GZipMiddleware, minimum_size=2048, compresslevel=1)
    app.add_middleware(SecurityHeaders, docs_paths=("/docs", "/redoc"))
    if metrics is not None:  # added after the layers above: it times and counts what they answer too
        app.add_middleware(RequestMetrics, metrics=metrics)
    for module in (ingest, jobs, scalars, logs, system, files, keys, session, health, insights):
        app.include_router(module.router)
    sdk.install(app, Path(settings.data_dir) / "sdk")
    docs_pages.install(app)
    for extend in _default_extensions() + list(extensions or []):
        extend(app)
    _install_error_handlers(app)
    return app


@asynccontextmanager
async def _lifespan(app: FastAPI) -> AsyncIterator[None]:
    """The insight detectors' periodic evaluation runs while the app serves (when ``insights_interval_s`` > 0)."""
    app.state.insights.start()
    try:
        yield
    finally:
        await run_in_threadpool(app.state.insights.close)


def add_error_shape(
    app: FastAPI, matches: Callable[[Request], bool], render: Callable[[int, str, str, str | None], Response]
) -> None:
    """Let an API family answer errors on its own routes in its own shape."""
    app.state.error_shapes.append((matches, render))


def _render(request: Request, status: int, code: str, message: str, field: str | None) -> Response:
    for matches, render in request.app.state.error_shapes:
        if matches(request):
            return render(status, code, message, field)
    headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
    return error_response(status, code, message, field, headers)


def _install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(JobpulseError)
    async def jobpulse_error(request: Request, exc: JobpulseError) -> Response:
        if exc.status >= 500:
            log.error("%s %s failed: %s", request.method, request.url.path, exc.message)
        return _render(request, exc.status, exc.code, exc.message, exc.field)

    @app.exception_handler(RequestValidationError)
    async def validation_error(request: Request, exc: RequestValidationError) -> Response:
        first = exc.errors()[0] if exc.errors() else {"loc": ("request",), "msg": "invalid request"}
        loc = [str(p) for p in first.get("loc", ()) if p not in ("query", "path", "body", "header")]
        field = ".".join(loc) or None
        return _render(request, 400, "bad_request", f"{field or 'request'}: {first.get('msg')}", field)

    @app.exception_handler(HTTPException)
    async def http_error(request: Request, exc: HTTPException) -> Response:
        code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, "http_error")
        message = "no such endpoint" if exc.status_code == 404 else str(exc.detail)
        return _render(request, exc.status_code, code, message, None)

    @app.exception_handler(Exception)
    async def unexpected(request: Request, exc: Exception) -> Response:
        log.exception("%s %s failed", request.method, request.url.path)
        return _render(request, 500, "internal_error", "the server failed to handle this request", None)


def _default_extensions() -> list[Callable[[FastAPI], None]]:
    """The compatible APIs and the web UI; each module's ``install`` adds its routes and error shape."""
    from .. import ui
    from ..compat import baseten, clearml, modelarts, pai

    return [modelarts.install, pai.install, baseten.install, clearml.install, ui.install]
