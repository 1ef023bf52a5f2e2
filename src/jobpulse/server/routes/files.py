"""Files of a job (debug images, artifacts): upload and serve back by the URL an event carries."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request
from starlette.concurrency import run_in_threadpool
from starlette.responses import StreamingResponse

from ...store import ApiKey
from ..context import caller, context
from ..headers import user_file
from ..responses import JSON
from .ingest import read_body

router = APIRouter(tags=["files"])


def file_url(job: str, name: str) -> str:
    return f"/jp/v1/jobs/{job}/files/{name}"


@router.put("/jp/v1/jobs/{job}/files/{name:path}", summary="Upload a file of a job; answers the URL to put in events")
async def upload(request: Request, job: str, name: str, key: ApiKey = Depends(caller)) -> JSON:
    ctx = context(request)
    await run_in_threadpool(ctx.access.require, key, job, "write")
    data = await read_body(request, ctx.settings.max_file_bytes)
    size = await run_in_threadpool(ctx.files.write, job, name, data)
    return JSON({"url": file_url(job, name), "bytes": size}, status_code=201)


@router.get(
    "/jp/v1/jobs/{job}/files/{name:path}",
    summary="Download a file of a job",
    description="A PNG, JPEG, GIF or WebP image (recognised by its bytes) is answered inline as that image; "
    "any other file as a download (`Content-Disposition: attachment`). Every file is sandboxed.",
)
def download(request: Request, job: str, name: str, key: ApiKey = Depends(caller)) -> StreamingResponse:
    ctx = context(request)
    ctx.access.require(key, job)
    found = ctx.files.open(job, name)
    return user_file(name, found.head, found.size, found.pieces(), "private, max-age=3600")
