"""ClearML's files server, backed by jobpulse's file store.

Point ``CLEARML_FILES_HOST`` at ``<jobpulse URL>/clearml/files``. ClearML clients upload with ``POST
/clearml/files[/<folder>]`` and a multipart body whose field name is the object's path below that URL
(``/<project>/<task name>.<task id>/metrics/<metric>/<variant>/<file>``), download with ``GET`` and remove
with ``DELETE /clearml/files/<path>``. The object belongs to the task whose ``<name>.<task id>`` folder is
in its path; it is stored in that job's files, named by the rest of the path
(``metrics/<metric>/<variant>/<file>``), each part with characters outside letters, digits, ``._-`` and
space replaced by ``_`` and, when it had to be changed, a short hash appended, so different paths never
share a file. The file is then also readable through the native API at ``/jp/v1/jobs/<task
id>/files/<name>``; debug image events keep the URL ClearML gave them and record the native one in their
meta. Uploading needs write access to the task, reading read access; the caller authenticates as on the API
host (the ClearML SDK sends its token), and a download also with the ClearML web app's or jobpulse's UI session
cookie (``auth.file_reader``). Unlike ClearML's own files server, which serves anyone who has the address,
every file stays behind the same access check as the task's events.
"""

from __future__ import annotations

import hashlib
import mimetypes
import re
from urllib.parse import unquote, urlparse

from fastapi import FastAPI, Request
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import UploadFile
from starlette.responses import Response

from ...errors import BadRequest, JobpulseError, NotFound, PayloadTooLarge
from ...server.context import Context, context
from ...server.headers import user_file
from ...server.routes.files import file_url
from ...store.identity import JOB_ID
from .auth import authenticate, file_reader
from .envelope import ClearmlError, ClearmlJSON, error_response, from_jobpulse

PREFIX = "/clearml/files"
_TASK_FOLDER = re.compile(r"^.*\.([0-9a-f]{32})$")
_UNSAFE = re.compile(r"[^A-Za-z0-9._\- ]")
MAX_NAME = 255


def _part(segment: str) -> str:
    clean = _UNSAFE.sub("_", segment)
    if not clean[:1].isalnum():
        clean = "x" + clean
    if clean != segment:
        stem, dot, ext = clean.rpartition(".")
        digest = hashlib.sha1(segment.encode()).hexdigest()[:8]
        clean = f"{stem}-{digest}.{ext}" if dot and stem and len(ext) <= 8 else f"{clean}-{digest}"
    return clean


def stored_name(parts: list[str]) -> str:
    """The file-store name of an object path below its task folder (deterministic, see the module)."""
    name = "/".join(_part(p) for p in parts if p)
    if len(name) > MAX_NAME:
        digest = hashlib.sha1(name.encode()).hexdigest()[:16]
        ext = mimetypes.guess_extension(mimetypes.guess_type(name)[0] or "") or ""
        name = name[: MAX_NAME - len(digest) - len(ext) - 1].rstrip("/ ") + "-" + digest + ext
    return name


def split_path(path: str, exists: object = None) -> tuple[str, str] | None:
    """(task id, stored name) of an object path, or None when no task folder is in it.

    A folder ``<name>.<32 hex>`` marks the task; with ``exists`` (a function job id -> bool) any folder
    ``<name>.<job id>`` of an existing job does too.
    """
    parts = [p for p in path.split("/") if p]
    for i, part in enumerate(parts):
        match = _TASK_FOLDER.match(part)
        job = match.group(1) if match else None
        if job is None and exists is not None and "." in part:
            candidate = part.rsplit(".", 1)[1]
            if JOB_ID.match(candidate) and exists(candidate):  # type: ignore[operator]
                job = candidate
        if job is not None and i + 1 < len(parts):
            return job, stored_name(parts[i + 1 :])
    return None


def native_url(url: str) -> str | None:
    """The native file URL of a ClearML files-server URL of this server, else None."""
    path = unquote(urlparse(url).path)
    at = path.find(PREFIX + "/")
    if at < 0:
        return None
    found = split_path(path[at + len(PREFIX) :])
    return file_url(*found) if found else None


def _locate(ctx: Context, path: str) -> tuple[str, str]:
    found = split_path(path, exists=lambda job: ctx.store.jobs.get(job) is not None)
    if found is None:
        raise BadRequest(
            f"object path {path!r} names no task: expected /<project>/<task name>.<task id>/...", field="path"
        )
    return found


def _error(exc: Exception) -> Response:
    if isinstance(exc, NotFound) and exc.field in ("name", "path"):
        exc = ClearmlError((404, 0), exc.message)
    elif isinstance(exc, JobpulseError):
        exc = from_jobpulse(exc)
    if not isinstance(exc, ClearmlError):
        raise exc
    if exc.code == 400 and exc.subcode == 101:  # a missing task is a missing file here
        exc.code, exc.subcode = 404, 0
    return error_response(
        exc.code, exc.subcode, exc.message, endpoint="files", error_data=exc.data, status=exc.http_status
    )


async def upload(request: Request) -> Response:
    ctx = context(request)
    try:
        key = await run_in_threadpool(authenticate, ctx, request)
        declared = request.headers.get("content-length")
        if declared and declared.isdigit() and int(declared) > ctx.settings.max_file_bytes + 65536:
            raise PayloadTooLarge(f"upload is larger than {ctx.settings.max_file_bytes} bytes", field="body")
        folder = request.path_params.get("path", "")
        stored = []
        async with request.form(max_part_size=ctx.settings.max_file_bytes) as form:
            for field_name, value in form.multi_items():
                if not isinstance(value, UploadFile):
                    continue
                data = await value.read()
                if len(data) > ctx.settings.max_file_bytes:
                    raise PayloadTooLarge(f"file is larger than {ctx.settings.max_file_bytes} bytes", field=field_name)
                job, name = await run_in_threadpool(_locate, ctx, f"{folder}/{field_name}")
                await run_in_threadpool(ctx.access.job, key, job, "write")
                await run_in_threadpool(ctx.files.write, job, name, data)
                stored.append({"path": field_name, "url": file_url(job, name), "bytes": len(data)})
        if not stored:
            raise BadRequest(
                "the upload holds no file: send multipart/form-data with the file under its path",
                field="body",
            )
        return ClearmlJSON({"files": stored})
    except Exception as exc:
        return _error(exc)


async def download(request: Request) -> Response:
    ctx = context(request)
    try:
        key = await run_in_threadpool(file_reader, ctx, request)
        job, name = await run_in_threadpool(_locate, ctx, request.path_params["path"])
        await run_in_threadpool(ctx.access.job, key, job)
        found = await run_in_threadpool(ctx.files.open, job, name)
        body = found.pieces() if request.method != "HEAD" else ()
        return user_file(name, found.head, found.size, body, "private, max-age=3600")
    except Exception as exc:
        return _error(exc)


async def delete(request: Request) -> Response:
    ctx = context(request)
    try:
        key = await run_in_threadpool(authenticate, ctx, request)
        job, name = await run_in_threadpool(_locate, ctx, request.path_params["path"])
        await run_in_threadpool(ctx.access.job, key, job, "write")
        if not await run_in_threadpool(ctx.files.delete, job, name):
            raise NotFound(f"file {request.path_params['path']!r} does not exist", field="path")
        return ClearmlJSON({"deleted": True})
    except Exception as exc:
        return _error(exc)


def install(app: FastAPI) -> None:
    router = app.router
    router.add_route(PREFIX, upload, methods=["POST"], include_in_schema=False)
    router.add_route(PREFIX + "/", upload, methods=["POST"], include_in_schema=False)
    router.add_route(PREFIX + "/{path:path}", upload, methods=["POST"], include_in_schema=False)
    router.add_route(PREFIX + "/{path:path}", download, methods=["GET", "HEAD"], include_in_schema=False)
    router.add_route(PREFIX + "/{path:path}", delete, methods=["DELETE"], include_in_schema=False)
