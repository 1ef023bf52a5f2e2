"""What operators and orchestrators ask of a replica: alive (``/healthz``), ready (``/readyz``), ``/metrics``."""

from __future__ import annotations

from fastapi import APIRouter, Request
from starlette.concurrency import run_in_threadpool
from starlette.responses import PlainTextResponse, Response

from ...errors import NotFound
from ..context import caller, context
from ..responses import JSON, error_body

router = APIRouter(tags=["operations"])


@router.get("/healthz", summary="Liveness: the server process answers (the store is not asked)")
async def healthz() -> JSON:
    return JSON({"status": "ok"})


@router.get(
    "/readyz",
    summary="Readiness: the store answers a one-row query in time; 503 naming the failure otherwise",
    responses={503: {"description": "the store failed or did not answer within readiness_timeout_ms"}},
)
async def readyz(request: Request) -> JSON:
    ctx = context(request)
    failure = await ctx.readiness.failure()
    if failure is None:
        return JSON({"status": "ready", "store": ctx.store.engine.name})
    code, message = failure
    body = {"status": "unavailable", "store": ctx.store.engine.name, **error_body(503, code, message)}
    return JSON(body, status_code=503)


@router.get(
    "/metrics",
    summary="The server's figures in Prometheus text format (docs/operations.md); access per metrics_access",
    response_class=PlainTextResponse,
)
async def metrics(request: Request) -> Response:
    ctx = context(request)
    if ctx.metrics is None:
        raise NotFound("this server keeps no metrics (metrics_access is 'off')")
    if ctx.settings.metrics_access == "key":
        await caller(request)
    # rendered off the event loop: with many routes the text takes milliseconds
    body, content_type = await run_in_threadpool(ctx.metrics.exposition, request.headers.get("accept"))
    return Response(body, media_type=content_type)
