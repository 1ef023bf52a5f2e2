"""Logs of a job: head and tail, paging earlier or later, filters, search, live follow and download."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime

import orjson
from fastapi import APIRouter, Depends, Request
from starlette.concurrency import run_in_threadpool
from starlette.responses import StreamingResponse

from ...errors import BadRequest
from ...store import ApiKey, LogFilter
from ...store.logs import LEVELS
from ..context import Context, caller, context, page_args, split_list
from ..responses import JSON
from .system import range_end

router = APIRouter(tags=["logs"])
_DOWNLOAD_PAGE = 20_000


def log_filter(
    worker: str | None = None,
    level: str | None = None,
    q: str | None = None,
    since: str | None = None,
    until: str | None = None,
) -> LogFilter:
    """The filters every log route takes (a dependency): workers, levels, a search and a time range."""
    if q is not None and len(q) > 1000:
        raise BadRequest("'q' is longer than 1000 characters", field="q")
    levels = tuple(s.lower() for s in split_list(level))
    unknown = [name for name in levels if name not in LEVELS]
    if unknown:  # checked here, before a streamed answer has started
        raise BadRequest(f"'level' must be among {', '.join(LEVELS)}, got {unknown[0]!r}", field="level")
    return LogFilter(
        workers=tuple(split_list(worker)),
        levels=levels,
        search=q or "",
        since_ms=range_end(since, "since"),
        until_ms=range_end(until, "until"),
    )


def _position(ctx: Context, token: str, name: str) -> tuple[int, str, int]:
    body = ctx.signer.verify("log", token, field=name)
    return body["t"], body["w"], body["s"]


def _cursor(ctx: Context, line: dict) -> str:
    return ctx.signer.sign("log", {"t": line["ts"], "w": line["worker"], "s": line["seq"]})


def _page(ctx: Context, lines: list[dict]) -> dict:
    for line in lines:
        line["cursor"] = _cursor(ctx, line)
    return {
        "lines": lines,
        "first_cursor": lines[0]["cursor"] if lines else None,
        "last_cursor": lines[-1]["cursor"] if lines else None,
    }


@router.get("/jp/v1/jobs/{job}/logs", summary="Log lines: head or tail, or a page before/after a cursor")
def read_logs(
    request: Request,
    job: str,
    start: str = "tail",
    limit: str = "500",
    before: str | None = None,
    after: str | None = None,
    key: ApiKey = Depends(caller),
    where: LogFilter = Depends(log_filter),
) -> JSON:
    ctx = context(request)
    ctx.access.require(key, job)
    size = page_args(limit, maximum=100_000)
    if before and after:
        raise BadRequest("give 'before' or 'after', not both", field="before")
    if before:
        lines = ctx.store.logs.read(
            job, direction="backward", position=_position(ctx, before, "before"), limit=size, where=where
        )
    elif after:
        lines = ctx.store.logs.read(
            job, direction="forward", position=_position(ctx, after, "after"), limit=size, where=where
        )
    elif start in ("head", "tail"):
        lines = ctx.store.logs.read(
            job, direction="forward" if start == "head" else "backward", limit=size, where=where
        )
    else:
        raise BadRequest("'start' must be 'head' or 'tail'", field="start")
    return JSON(_page(ctx, lines))


@router.get("/jp/v1/jobs/{job}/logs/count", summary="Number of lines matching the filters")
def count_logs(
    request: Request,
    job: str,
    key: ApiKey = Depends(caller),
    where: LogFilter = Depends(log_filter),
) -> JSON:
    ctx = context(request)
    ctx.access.require(key, job)
    return JSON({"job": job, "lines": ctx.store.logs.count(job, where)})


@router.get("/jp/v1/jobs/{job}/logs/workers", summary="Workers with logs, with line counts and sizes")
def log_workers(request: Request, job: str, key: ApiKey = Depends(caller)) -> JSON:
    ctx = context(request)
    ctx.access.require(key, job)
    return JSON({"job": job, "workers": ctx.store.logs.workers(job)})


@router.get("/jp/v1/jobs/{job}/logs/follow", summary="Live follow as server-sent events (event 'lines')")
async def follow_logs(
    request: Request,
    job: str,
    after: str | None = None,
    worker: str | None = None,
    level: str | None = None,
    q: str | None = None,
    key: ApiKey = Depends(caller),
) -> StreamingResponse:
    ctx = context(request)
    await run_in_threadpool(ctx.access.require, key, job)
    where = log_filter(worker, level, q)
    token = after or request.headers.get("last-event-id")
    position = _position(ctx, token, "after") if token else None
    if position is None:
        last = await run_in_threadpool(ctx.store.logs.read, job, direction="backward", limit=1, where=where)
        position = (last[0]["ts"], last[0]["worker"], last[0]["seq"]) if last else None
    poll = ctx.settings.follow_poll_ms / 1000

    async def stream() -> AsyncIterator[bytes]:
        nonlocal position
        idle = 0.0
        yield b": following\n\n"
        while not await request.is_disconnected():
            lines = await run_in_threadpool(
                ctx.store.logs.read, job, direction="forward", position=position, limit=1000, where=where
            )
            if lines:
                page = _page(ctx, lines)
                position = (lines[-1]["ts"], lines[-1]["worker"], lines[-1]["seq"])
                yield (
                    b"id: " + page["last_cursor"].encode() + b"\nevent: lines\ndata: " + orjson.dumps(page) + b"\n\n"
                )
                idle = 0.0
                continue
            await asyncio.sleep(poll)
            idle += poll
            if idle >= 15:
                idle = 0.0
                yield b": keep-alive\n\n"

    return StreamingResponse(
        stream(),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
    )


def _text_line(line: dict) -> bytes:
    when = datetime.fromtimestamp(line["ts"] / 1000, tz=UTC).isoformat(timespec="milliseconds")
    return f"{when.replace('+00:00', 'Z')} {line['worker']} {line['level'].upper()} {line['msg']}\n".encode()


@router.get("/jp/v1/jobs/{job}/logs/download", summary="The whole (filtered) log as text or JSON lines, streamed")
async def download_logs(
    request: Request,
    job: str,
    format: str = "text",
    key: ApiKey = Depends(caller),
    where: LogFilter = Depends(log_filter),
) -> StreamingResponse:
    ctx = context(request)
    await run_in_threadpool(ctx.access.require, key, job)
    if format not in ("text", "jsonl"):
        raise BadRequest("'format' must be 'text' or 'jsonl'", field="format")
    encode = _text_line if format == "text" else (lambda line: orjson.dumps(line) + b"\n")

    async def stream() -> AsyncIterator[bytes]:
        position = None
        while True:
            lines = await run_in_threadpool(
                ctx.store.logs.read,
                job,
                direction="forward",
                position=position,
                limit=_DOWNLOAD_PAGE,
                where=where,
            )
            if not lines:
                return
            yield b"".join(encode(line) for line in lines)
            if len(lines) < _DOWNLOAD_PAGE:
                return
            position = (lines[-1]["ts"], lines[-1]["worker"], lines[-1]["seq"])

    suffix = "log" if format == "text" else "jsonl"
    return StreamingResponse(
        stream(),
        media_type="text/plain; charset=utf-8" if format == "text" else "application/x-ndjson",
        headers={"Content-Disposition": f'attachment; filename="{job}.{suffix}"'},
    )
