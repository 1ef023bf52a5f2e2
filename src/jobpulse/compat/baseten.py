"""Baseten training-job metrics: every system metric of a job, per GPU rank, per node, with the job itself.

    GET  /v1/training_projects/{training_project_id}/jobs/{training_job_id}/metrics
         ?start_epoch_millis=&end_epoch_millis=&step_seconds=
    POST /v1/training_projects/{training_project_id}/jobs/{training_job_id}/metrics
         {"start_epoch_millis": int | null, "end_epoch_millis": int | null, "step_seconds": int | null}
    Authorization: Bearer <key>   (as the ``baseten`` SDK sends it; ``Api-Key <key>`` works too)

Identity: ``training_project_id`` is the jobpulse project, which must own the job ``training_job_id``; a GPU
rank is a device index of a node, and a node is a machine: in a job of nodes and ranks a node worker
(``node-0``, ``node-<host>``), whose ranks are part of it (``compat/nodes.py``), and every worker that no node
worker holds (a lone process, a rank whose node never registered, every worker of a job without node workers)
is a node of its own. The jobpulse API key goes in ``Authorization: Bearer <key>`` or
``Authorization: Api-Key <key>``. Both forms take the same parameters (the SDK marks POST deprecated).

Window: ``end_epoch_millis`` defaults to the job's end, or now while it runs; ``start_epoch_millis`` defaults
to one hour before the end, or the job's start if later (the earliest start of the job or of its workers).
So a request with both null answers the job's latest hour, a point a minute: what a live view polling every
few seconds needs (Baseten's own CLI polls this way); ask for a wider window explicitly. A window given with
``start_epoch_millis`` is cut into at most ``MAX_BUCKETS`` steps of a round length (1 s, 2 s, 5 s, 10 s, ...
1 min, ... 1 h, ... 1 d, 7 d: the smallest that fits), unless ``step_seconds`` names the step (at most
``MAX_POINTS`` steps in the window); a whole-hour step starts at the hour of the window's
start and is read from the hourly rollup, a whole-minute step at its minute from the per-minute rollup.
Each point is the mean of the step's samples and its ``timestamp`` is the step's start in ISO 8601 (UTC,
``Z``); a step without samples, or whose mean is not a finite number (``value`` must be a JSON number), has
no point.

Units: ``gpu_memory_usage_bytes`` bytes (stored ``gpu_mem_bytes``), ``gpu_utilization`` a fraction 0-1
(stored ``gpu_util`` percent / 100), ``cpu_usage`` cores in use (``cpu_cores``), ``cpu_memory_usage_bytes``
bytes (``mem_bytes``), ``ephemeral_storage`` and ``cache`` ``usage_bytes`` in bytes (``ephemeral_bytes``,
``cache_bytes``) and ``utilization`` as fractions (``ephemeral_util``, ``cache_util``).

Answer: the top-level per-rank maps, ``cpu_*``, ``ephemeral_storage`` and ``cache`` are the leader's node's:
the node holding the job's ``leader`` (else ``worker-0``, else its first worker), or the leader itself where no
node holds it. ``cache`` is null when no worker of the job ever reported a cache metric. ``per_node_metrics``
has every node of the job, in worker order, then any rank held by a node that has samples of its own (the
SDK's in-process sampling). ``training_job`` describes the job: statuses map to TRAINING_JOB_CREATED,
_RUNNING, _COMPLETED, _FAILED and _STOPPED; ``node_count`` is the job's number of nodes (at least 1);
``instance_type`` comes from the job's ``instance_type`` (id, name, memory_limit_mib, millicpu_limit, gpu_count,
gpu_type, gpu_memory_limit_mib; absent numbers are 0, absent GPU fields null), which ``jobpulse run`` and ``jobpulse
agent`` fill from the hardware of the worker that registers the job, unless the job was given one.

Errors: ``{"detail": "<message>"}`` with the HTTP status (400 bad body, query, id or window; 401 missing or
invalid key; 403 key without access to the project; 404 no such job in the project, or no such endpoint). Baseten's
schemas are pydantic models, whose services answer errors in this FastAPI shape.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import numpy as np
import orjson
from fastapi import APIRouter, FastAPI, Request
from starlette.concurrency import run_in_threadpool
from starlette.responses import Response

from ..errors import BadRequest, NotFound, Unauthorized
from ..server.app import add_error_shape
from ..server.context import Context, context
from ..server.responses import JSON
from ..server.routes.ingest import read_body
from ..store import ApiKey, Job
from ..store.identity import check_job, check_project, now_ms
from ..store.system import MAX_POINTS, align_start
from . import nodes as hierarchy

router = APIRouter(tags=["Baseten"])

# response field -> (stored metric, divisor to the response's unit)
GPU = {"gpu_memory_usage_bytes": ("gpu_mem_bytes", 1.0), "gpu_utilization": ("gpu_util", 100.0)}
HOST = {"cpu_usage": ("cpu_cores", 1.0), "cpu_memory_usage_bytes": ("mem_bytes", 1.0)}
STORAGE = {"ephemeral_storage": ("ephemeral_bytes", "ephemeral_util"), "cache": ("cache_bytes", "cache_util")}
METRICS = [m for m, _ in GPU.values()] + [m for m, _ in HOST.values()] + [m for p in STORAGE.values() for m in p]
STATUSES = {
    "created": "TRAINING_JOB_CREATED",
    "running": "TRAINING_JOB_RUNNING",
    "completed": "TRAINING_JOB_COMPLETED",
    "failed": "TRAINING_JOB_FAILED",
    "stopped": "TRAINING_JOB_STOPPED",
}
MAX_BUCKETS = 120
DEFAULT_SPAN_MS = 3_600_000
MAX_BODY = 64 * 1024
LAST_MS = 253_402_300_799_999  # 9999-12-31T23:59:59.999Z
MAX_STEP_S = 366 * 86_400
STEPS_S = (1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400, 604800)
_PATHS = re.compile(r"^/v1/training_projects(/|$)")


def install(app: FastAPI) -> None:
    app.include_router(router)
    add_error_shape(app, lambda request: bool(_PATHS.match(request.url.path)), render_error)


def render_error(status: int, code: str, message: str, field: str | None) -> Response:
    """Every error of these routes: ``{"detail": message}``."""
    headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
    return JSON({"detail": message}, status_code=status, headers=headers)


def iso(ms: int) -> str:
    """Epoch milliseconds as ISO 8601 in UTC: ``2023-11-07T05:31:56Z`` (with ``.123`` when not whole)."""
    moment = datetime.fromtimestamp(ms // 1000, tz=UTC).strftime("%Y-%m-%dT%H:%M:%S")
    return f"{moment}.{ms % 1000:03d}Z" if ms % 1000 else f"{moment}Z"


def step_for(span_ms: int) -> int:
    for step in STEPS_S:
        if span_ms // (step * 1000) + 1 <= MAX_BUCKETS:
            return step * 1000
    return STEPS_S[-1] * 1000


def _api_key(request: Request, ctx: Context) -> ApiKey:
    header = request.headers.get("authorization", "").strip()
    if not header:
        raise Unauthorized("missing API key: send 'Authorization: Bearer <key>' or 'Authorization: Api-Key <key>'")
    scheme, _, value = header.partition(" ")
    if scheme.lower() not in ("bearer", "api-key") or not value.strip():
        raise Unauthorized("the Authorization header must read 'Bearer <key>' or 'Api-Key <key>'")
    return ctx.access.authenticate(value.strip())


@dataclass(frozen=True)
class Window:
    """What a request asks for: its window in epoch milliseconds and its step in seconds (None: defaults)."""

    start: int | None = None
    end: int | None = None
    step_s: int | None = None


_LIMITS = {"start_epoch_millis": (0, LAST_MS), "end_epoch_millis": (0, LAST_MS), "step_seconds": (1, MAX_STEP_S)}
_MEANING = {
    "start_epoch_millis": "an integer number of epoch milliseconds",
    "end_epoch_millis": "an integer number of epoch milliseconds",
    "step_seconds": f"a whole number of seconds from 1 to {MAX_STEP_S}",
}
# the window's fields as the OpenAPI document describes them (the routes read them themselves)
_WINDOW = {
    name: {"type": ["integer", "null"], "minimum": low, "maximum": high, "description": _MEANING[name]}
    for name, (low, high) in _LIMITS.items()
}


def _checked(name: str, value: object) -> int | None:
    low, high = _LIMITS[name]
    if value is not None and (not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high):
        raise BadRequest(f"{name} must be {_MEANING[name]} or null, got {value!r}")
    return value


def body_window(body: bytes) -> Window:
    """The window of a POST body."""
    if not body.strip():
        return Window()
    try:
        doc = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise BadRequest(f"the body is not valid JSON: {exc}") from exc
    if not isinstance(doc, dict):
        raise BadRequest("the body must be a JSON object with start_epoch_millis, end_epoch_millis and step_seconds")
    return Window(*(_checked(name, doc.get(name)) for name in _LIMITS))


def query_window(request: Request) -> Window:
    """The window of a GET's query parameters (an empty one counts as absent)."""
    values = []
    for name in _LIMITS:
        text = request.query_params.get(name, "").strip()
        if text and not re.fullmatch(r"-?\d{1,19}", text):
            raise BadRequest(f"{name} must be {_MEANING[name]}, got {text!r}")
        values.append(_checked(name, int(text)) if text else None)
    return Window(*values)


def _points(times: list[str], row: np.ndarray, divisor: float) -> list[dict[str, Any]]:
    where = np.flatnonzero(~np.isnan(row))
    values = (row[where] / divisor).tolist() if divisor != 1.0 else row[where].tolist()
    return [{"value": v, "timestamp": times[i]} for i, v in zip(where.tolist(), values, strict=True)]


def _node(times: list[str], rows: dict[tuple[str, str], np.ndarray]) -> dict[str, Any]:
    """TrainingJobMetricsV1 of one worker."""
    empty = np.full(len(times), np.nan)
    metrics: dict[str, Any] = {}
    for name, (stored, divisor) in GPU.items():
        ranks = sorted((d for (m, d) in rows if m == stored), key=lambda d: (len(d), d))
        metrics[name] = {rank: _points(times, rows[(stored, rank)], divisor) for rank in ranks}
    for name, (stored, divisor) in HOST.items():
        metrics[name] = _points(times, rows.get((stored, ""), empty), divisor)
    usage, util = STORAGE["ephemeral_storage"]
    metrics["ephemeral_storage"] = {
        "usage_bytes": _points(times, rows.get((usage, ""), empty), 1.0),
        "utilization": _points(times, rows.get((util, ""), empty), 1.0),
    }
    return metrics


def _instance_type(spec: dict[str, Any]) -> dict[str, Any]:
    def number(name: str) -> int:
        value = spec.get(name)
        return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else 0

    gpu_memory = spec.get("gpu_memory_limit_mib")
    return {
        "id": str(spec.get("id") or spec.get("name") or ""),
        "name": str(spec.get("name") or spec.get("id") or ""),
        "memory_limit_mib": number("memory_limit_mib"),
        "millicpu_limit": number("millicpu_limit"),
        "gpu_count": number("gpu_count"),
        "gpu_type": str(spec["gpu_type"]) if spec.get("gpu_type") else None,
        "gpu_memory_limit_mib": int(gpu_memory)
        if isinstance(gpu_memory, (int, float)) and not isinstance(gpu_memory, bool)
        else None,
    }


def training_job(job: Job, nodes: int) -> dict[str, Any]:
    """TrainingJobV1 of a jobpulse job of ``nodes`` workers."""
    return {
        "id": job.job,
        "created_at": iso(job.created),
        "current_status": STATUSES.get(job.status, job.status),
        "error_message": job.error_message or None,
        "instance_type": _instance_type(job.instance_type),
        "node_count": max(1, nodes),
        "updated_at": iso(job.updated),
        "training_project_id": job.project,
        "training_project": {"id": job.project, "name": job.project},
        "name": job.name or None,
    }


def _answer(ctx: Context, key: ApiKey, project: str, job_id: str, window: Window) -> dict:
    start, end = window.start, window.end
    check_project(project, "training_project_id")
    check_job(job_id, "training_job_id")
    job = ctx.access.job_of_project(key, project, job_id)
    if job is None:
        raise NotFound(f"training job {job_id!r} does not exist in training project {project!r}")
    registered = ctx.store.jobs.workers(job.job)
    if end is None:
        end = job.ended if job.ended is not None else now_ms()
    span = DEFAULT_SPAN_MS
    if start is None:
        first = min(t for t in [job.started, job.created, *(w.started for w in registered)] if t)
        start = min(max(first, end - DEFAULT_SPAN_MS), end)
    else:
        span = end - start
    if start > end:
        raise BadRequest("start_epoch_millis must not be after end_epoch_millis")
    step = window.step_s * 1000 if window.step_s else step_for(span)
    start = align_start(start, step)
    if (end - start) // step + 1 > MAX_POINTS:
        raise BadRequest(
            f"the window from start_epoch_millis to end_epoch_millis is more than {MAX_POINTS} steps; "
            "ask for a shorter window or a larger step_seconds"
        )
    grid = ctx.store.system.grid(job.job, METRICS, start_ms=start, end_ms=end, step_ms=step)
    times = [iso(t) for t in grid.times.tolist()]
    by_worker: dict[str, dict[tuple[str, str], np.ndarray]] = {}
    for i, (worker, metric, device) in enumerate(grid.keys):
        by_worker.setdefault(worker, {})[(metric, device)] = grid.values[i]
    workers, count = hierarchy.listed(registered, list(by_worker))
    known = {w.worker for w in registered} | set(by_worker)
    named = job.leader or ("worker-0" if "worker-0" in known or not workers else workers[0])
    leader = hierarchy.unit_of(registered, named)
    nodes = {worker: _node(times, by_worker.get(worker, {})) for worker in workers}
    top = nodes.get(leader) or _node(times, {})
    leader_rows = by_worker.get(leader, {})
    usage, util = STORAGE["cache"]
    cache = None
    if (usage, "") in leader_rows or (util, "") in leader_rows or ctx.store.system.present(job.job, [usage, util]):
        empty = np.full(len(times), np.nan)
        cache = {
            "usage_bytes": _points(times, leader_rows.get((usage, ""), empty), 1.0),
            "utilization": _points(times, leader_rows.get((util, ""), empty), 1.0),
        }
    return {
        **top,
        "training_job": training_job(job, count),
        "cache": cache,
        "per_node_metrics": [{"node_id": worker, "metrics": nodes[worker]} for worker in workers],
    }


@router.get(
    "/v1/training_projects/{training_project_id}/jobs/{training_job_id}/metrics",
    summary="Baseten: a training job's metrics per GPU rank and per node",
    openapi_extra={
        "parameters": [{"name": n, "in": "query", "schema": {**_WINDOW[n], "type": "integer"}} for n in _WINDOW]
    },
)
async def get_training_job_metrics(request: Request, training_project_id: str, training_job_id: str) -> JSON:
    ctx = context(request)
    key = await run_in_threadpool(_api_key, request, ctx)
    window = query_window(request)
    return JSON(await run_in_threadpool(_answer, ctx, key, training_project_id, training_job_id, window))


@router.post(
    "/v1/training_projects/{training_project_id}/jobs/{training_job_id}/metrics",
    summary="Baseten: a training job's metrics per GPU rank and per node (the older form, as GET)",
    openapi_extra={
        "requestBody": {
            "content": {"application/json": {"schema": {"type": "object", "properties": _WINDOW}}},
        }
    },
)
async def training_job_metrics(request: Request, training_project_id: str, training_job_id: str) -> JSON:
    ctx = context(request)
    key = await run_in_threadpool(_api_key, request, ctx)
    window = body_window(await read_body(request, MAX_BODY))
    return JSON(await run_in_threadpool(_answer, ctx, key, training_project_id, training_job_id, window))
