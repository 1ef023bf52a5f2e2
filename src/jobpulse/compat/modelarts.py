"""Huawei ModelArts training-job APIs: a task's running metrics and a preview of its log.

    GET /v2/{project_id}/training-jobs/{training_job_id}/metrics/{task_id}
    GET /v2/{project_id}/training-jobs/{training_job_id}/tasks/{task_id}/logs/preview

Identity: ``project_id`` is the jobpulse project, ``training_job_id`` the job and ``task_id`` a worker. A
ModelArts task is a machine: in a job of nodes and ranks it is a node worker (``node-0``, ``node-<host>``: what
``jobpulse run`` registers), whose ranks are part of it (``compat/nodes.py``); a worker that no node worker
holds (a lone process, a rank whose node never registered, every worker of a job without node workers) is a
task of its own (``worker-0``, ``worker-1``, ...). A rank held by a node still answers as itself. The project
must own the job.

Credentials, as the official SDK (``huaweicloudsdkmodelarts`` over ``huaweicloudsdkcore``) sends them: a
jobpulse access key pair as the ``BasicCredentials`` AK/SK, the request signed with ``SDK-HMAC-SHA256`` and
checked as ``server/signatures/sdk_hmac.py`` describes (``X-Sdk-Date`` within 15 minutes of the server's clock);
``X-Project-Id``, which the SDK sends from the credentials' project, must name the path's project. Or a
jobpulse API key where ModelArts clients put an IAM token, the ``X-Auth-Token`` header. Every answer of these
routes, errors too, carries an ``X-Request-Id`` header (32 hex digits), which the SDK's exceptions report.

Running metrics: ``metrics`` lists, in this order, cpuUsage, memUsage, gpuUtil, gpuMemUsage, npuUtil and
npuMemUsage, read from the stored ``cpu_util`` (% of the worker's CPU limit), ``mem_util`` (% of its memory
limit), ``gpu_util``, ``gpu_mem_util``, ``npu_util`` and ``npu_mem_util`` (all percent), so every value is a
percentage as in the document's example. ``value`` holds one average per wall-clock minute, from the job's
first minute (the earliest start of the job or of any of its workers) to its last (the minute it ended, or the
current minute while it runs); accelerator metrics average all samples of all the worker's devices in the
minute. A minute without samples, or whose mean is not a number (a NaN or infinite sample: minutes are read
from the per-minute rollup, which sums them), and every minute of a metric the worker never reported, is
``-1``. Values are rounded to 3 decimals. A job longer than the store's series limit shows its latest
``MAX_POINTS`` minutes. A node's metrics are its own samples: the node wrapper samples the whole node.

Log preview: the task's log is a node's own lines (its launcher's output) and its ranks' console lines, merged in
time order as the node's console shows them, each line as it was written (no rank prefix); a task of its own has
its own lines. ``content`` is the task's whole log when it fits in 5 MiB (5,242,880 bytes), else its latest lines
that fit, cut at a line boundary; each line ends with a newline, so for a log that fits ``current_size`` (bytes
of ``content``, UTF-8) equals ``full_size`` (bytes of the whole log). The tail is read from the end of the log,
so its cost does not grow with the size of the log.

Errors: ``{"error_code": "ModelArts.XXXX", "error_msg": "..."}`` with the HTTP status. Codes follow Huawei's
published list where it has one (ModelArts.0104 parameter error, ModelArts.0201 no token, ModelArts.0204 token
not valid, ModelArts.0203 token without rights to the resource), and as Huawei Cloud's API gateway answers a
refused AK/SK signature, 401 APIGW.0301 "Incorrect IAM authentication information: ..."; for what the list has
no general code for, jobpulse uses ModelArts.0404 (no such training job, task or endpoint), ModelArts.0405
(method not allowed), ModelArts.0500 (internal error) and ModelArts.0503 (store unavailable).
"""

from __future__ import annotations

import re
import uuid

import numpy as np
from fastapi import APIRouter, FastAPI, Request
from starlette.datastructures import MutableHeaders
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ..errors import BadRequest, NotFound, Unauthorized
from ..server.app import add_error_shape
from ..server.context import Context, context
from ..server.key_pairs import SignatureRefused, key_pairs
from ..server.responses import JSON
from ..server.signatures import SignedRequest, sdk_hmac
from ..store import ApiKey, Job, Worker
from ..store.identity import check_job, check_project, check_worker, now_ms
from ..store.system import MAX_POINTS, MINUTE_MS
from . import nodes

router = APIRouter(tags=["ModelArts"])

# ModelArts metric -> stored system metric, in the documented order.
METRICS = {
    "cpuUsage": "cpu_util",
    "memUsage": "mem_util",
    "gpuUtil": "gpu_util",
    "gpuMemUsage": "gpu_mem_util",
    "npuUtil": "npu_util",
    "npuMemUsage": "npu_mem_util",
}
PREVIEW_LIMIT = 5 * 1024 * 1024
NO_SAMPLE = -1
PREFIX = "ModelArts."
GATEWAY_PREFIX = "APIGW."
SIGNATURE_REFUSED = "APIGW.0301"
_CODES = {
    400: "ModelArts.0104",
    401: "ModelArts.0204",
    403: "ModelArts.0203",
    404: "ModelArts.0404",
    405: "ModelArts.0405",
    413: "ModelArts.0104",
    503: "ModelArts.0503",
}
_PATHS = re.compile(r"^/v2/[^/]+/training-jobs(/|$)")


def install(app: FastAPI) -> None:
    app.include_router(router)
    app.add_middleware(RequestId)
    add_error_shape(app, lambda request: bool(_PATHS.match(request.url.path)), render_error)


def new_request_id() -> str:
    return uuid.uuid4().hex


class RequestId:
    """ASGI middleware: every answer of these routes carries ``X-Request-Id``, as Huawei Cloud's do."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not _PATHS.match(scope["path"]):
            await self.app(scope, receive, send)
            return
        request_id = new_request_id()

        async def send_with_id(message: Message) -> None:
            if message["type"] == "http.response.start":
                MutableHeaders(scope=message)["X-Request-Id"] = request_id
            await send(message)

        await self.app(scope, receive, send_with_id)


def render_error(status: int, code: str, message: str, field: str | None) -> Response:
    """Every error of these routes: Huawei Cloud's ``{"error_code", "error_msg"}`` (with an ``X-Request-Id`` of
    its own, for an answer made outside ``RequestId``: a failure of the server itself)."""
    own = code.startswith(PREFIX) or code.startswith(GATEWAY_PREFIX)
    vendor = code if own else _CODES.get(status, "ModelArts.0500")
    headers = {"X-Request-Id": new_request_id()}
    return JSON({"error_code": vendor, "error_msg": message}, status_code=status, headers=headers)


def _caller(request: Request, ctx: Context, project_id: str) -> ApiKey:
    """The caller's key: an IAM-style token in ``X-Auth-Token``, or a request signed with an access key pair."""
    token = request.headers.get("x-auth-token", "").strip()
    if token:
        return ctx.access.authenticate(token)
    authorization = request.headers.get("authorization", "").strip()
    if not sdk_hmac.is_signature(authorization):
        raise Unauthorized(
            "no credential: sign the request with a jobpulse access key pair (the SDK's BasicCredentials AK/SK) "
            "or send a jobpulse API key in the X-Auth-Token header",
            code="ModelArts.0201",
        )
    header_project = request.headers.get("x-project-id", "").strip()
    if header_project and header_project != project_id:
        raise BadRequest(
            f"X-Project-Id {header_project!r} is not the project of the path, {project_id!r}", code="ModelArts.0104"
        )
    try:
        return sdk_hmac.verify(SignedRequest.of(request), authorization, key_pairs(request), now_ms())
    except SignatureRefused as exc:
        raise Unauthorized(f"Incorrect IAM authentication information: {exc.message}", code=SIGNATURE_REFUSED) from exc


def _task(request: Request, project_id: str, training_job_id: str, task_id: str) -> tuple[Context, Job, list[Worker]]:
    """The caller's job and its workers, after the access check; raises for every identity problem."""
    ctx = context(request)
    key = _caller(request, ctx, project_id)
    check_project(project_id, "project_id")
    check_job(training_job_id, "training_job_id")
    check_worker(task_id, "task_id")
    job = ctx.access.job_of_project(key, project_id, training_job_id)
    if job is None:
        raise NotFound(f"training job {training_job_id!r} does not exist in project {project_id!r}")
    workers = ctx.store.jobs.workers(job.job)
    if task_id not in {w.worker for w in workers}:
        tasks = nodes.units(workers)
        names = ", ".join(tasks[:20]) + (", ..." if len(tasks) > 20 else "") or "none"
        raise NotFound(f"task {task_id!r} does not exist in training job {training_job_id!r} (tasks: {names})")
    return ctx, job, workers


def job_minutes(job: Job, workers: list[Worker]) -> tuple[int, int]:
    """The job's first and last minute (epoch ms of their start)."""
    starts = [t for t in [job.started, job.created, *(w.started for w in workers)] if t]
    first = min(starts)
    last = job.ended if job.ended is not None else now_ms()
    first -= first % MINUTE_MS
    last = max(first, last - last % MINUTE_MS)
    if (last - first) // MINUTE_MS + 1 > MAX_POINTS:
        first = last - (MAX_POINTS - 1) * MINUTE_MS
    return first, last


@router.get(
    "/v2/{project_id}/training-jobs/{training_job_id}/metrics/{task_id}",
    summary="ModelArts: running metrics of a training task, one average per minute",
)
def task_metrics(request: Request, project_id: str, training_job_id: str, task_id: str) -> JSON:
    ctx, job, workers = _task(request, project_id, training_job_id, task_id)
    first, last = job_minutes(job, workers)
    grid = ctx.store.system.grid(
        job.job,
        list(METRICS.values()),
        start_ms=first,
        end_ms=last,
        step_ms=MINUTE_MS,
        workers=[task_id],
        pool_devices=True,
    )
    rows = {metric: grid.values[i] for i, (_, metric, _) in enumerate(grid.keys)}
    empty = [NO_SAMPLE] * len(grid.times)
    metrics = []
    for name, stored in METRICS.items():
        row = rows.get(stored)
        if row is None:
            values = empty
        else:
            rounded = np.round(row, 3).tolist()
            values = [NO_SAMPLE if v != v else v for v in rounded]
        metrics.append({"metric": name, "value": values})
    return JSON({"metrics": metrics})


@router.get(
    "/v2/{project_id}/training-jobs/{training_job_id}/tasks/{task_id}/logs/preview",
    summary="ModelArts: the latest part (at most 5 MiB) of a training task's log",
)
def task_log_preview(request: Request, project_id: str, training_job_id: str, task_id: str) -> JSON:
    ctx, job, workers = _task(request, project_id, training_job_id, task_id)
    text, full = ctx.store.logs.tail_bytes(job.job, nodes.members(workers, task_id), PREVIEW_LIMIT - 1)
    content = text + "\n" if text else ""
    size = len(content.encode())
    return JSON({"content": content, "current_size": size, "full_size": max(full, size)})
