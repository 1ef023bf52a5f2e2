"""Projects, jobs and workers: list, get, create, update, delete."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Request
from starlette.concurrency import run_in_threadpool

from ...errors import BadRequest
from ...ingest.limits import MAX_DEPTH, depth
from ...store import ApiKey, Job
from ...store.identity import check_at, check_job, check_placement, check_project, check_worker
from ...store.job_rows import STATUSES
from ..context import caller, context, page_args
from ..responses import JSON

router = APIRouter(tags=["jobs"])
_EDITABLE = {
    "name": str,
    "status": str,
    "error_message": str,
    "leader": str,
    "locked": bool,
    "tags": list,
    "config": dict,
    "instance_type": dict,
}
# placement (kind, node, rank, local_rank): where the worker sits in the job's nodes and ranks, store/jobs.py
_WORKER_EDITABLE = {
    "status": str,
    "exit_code": int,
    "host": str,
    "kind": str,
    "node": str,
    "rank": int,
    "local_rank": int,
}
EXIT_CODES = (-(2**31), 2**31 - 1)  # a process's exit status, as the store keeps it (32 bits)


def _json_body(allowed: dict[str, type], required: tuple[str, ...] = (), **more: dict[str, Any]) -> dict[str, Any]:
    """The OpenAPI description of a JSON object of ``allowed`` fields (and ``more``): the routes read their
    bodies themselves, so that every mistake gets the native error shape."""
    types = {str: "string", bool: "boolean", int: "integer", list: "array", dict: "object"}
    properties = {name: {"type": types[kind]} for name, kind in allowed.items()}
    properties["at"] = {"type": "integer", "minimum": 0, "description": "when the change happened (epoch ms)"}
    schema = {"type": "object", "properties": {**properties, **more}, "additionalProperties": False}
    if required:
        schema["required"] = list(required)
    return {"requestBody": {"required": True, "content": {"application/json": {"schema": schema}}}}


def _changes(body: Any, allowed: dict[str, type]) -> dict[str, Any]:
    if not isinstance(body, dict):
        raise BadRequest("body must be a JSON object", field="body")
    out = {}
    for name, value in body.items():
        if name not in allowed:
            raise BadRequest(f"unknown field {name!r}; allowed: {', '.join(sorted(allowed))}", field=name)
        kind = allowed[name]
        if kind is int and value is None:
            out[name] = None
            continue
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            raise BadRequest(f"'{name}' must be of type {kind.__name__}", field=name)
        if name == "tags" and not all(isinstance(t, str) and 0 < len(t) <= 128 for t in value):
            raise BadRequest("'tags' must be strings of 1-128 characters", field="tags")
        if isinstance(value, str) and len(value) > 10_000:
            raise BadRequest(f"'{name}' is longer than 10000 characters", field=name)
        if name == "exit_code" and not EXIT_CODES[0] <= value <= EXIT_CODES[1]:
            raise BadRequest(f"'exit_code' must be between {EXIT_CODES[0]} and {EXIT_CODES[1]}", field=name)
        out[name] = value
    return out


def _at(body: Any) -> int | None:
    """Take the change's own time out of ``body`` where the sender gave one (``at``, epoch milliseconds): a request
    sent late from a spool still says when the job or worker started or ended."""
    return check_at(body.pop("at")) if isinstance(body, dict) and "at" in body else None


async def _json(request: Request) -> Any:
    import orjson

    raw = await request.body()
    if depth(raw) > MAX_DEPTH:  # the job keeps its config, and writes it out again in every answer
        raise BadRequest(f"body nests arrays and objects deeper than {MAX_DEPTH} levels", field="body")
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise BadRequest(f"body is not valid JSON: {exc}", field="body") from exc


@router.get("/jp/v1/projects", summary="Projects visible to the caller, with job counts")
def list_projects(request: Request, key: ApiKey = Depends(caller)) -> JSON:
    return JSON({"projects": context(request).store.jobs.projects(key.visible_projects())})


@router.get("/jp/v1/jobs", summary="Jobs, newest first, filtered by project, status, tag or a name search")
def list_jobs(
    request: Request,
    project: str | None = None,
    status: str | None = None,
    tag: str | None = None,
    q: str | None = None,
    limit: int | str = 100,
    cursor: str | None = None,
    key: ApiKey = Depends(caller),
) -> JSON:
    ctx = context(request)
    limit = page_args(limit)
    projects = key.visible_projects()
    if project is not None:
        check_project(project)
        ctx.access.check(key, "read", project=project)
        projects = [project]
    if status is not None and status not in STATUSES:
        raise BadRequest(f"'status' must be one of {', '.join(STATUSES)}", field="status")
    after = None
    if cursor:
        body = ctx.signer.verify("jobs", cursor)
        after = (body["c"], body["j"])
    jobs = ctx.store.jobs.list(projects, status=status, tag=tag, search=q, limit=limit, after=after)
    nxt = ctx.signer.sign("jobs", {"c": jobs[-1].created, "j": jobs[-1].job}) if len(jobs) == limit else None
    counts = ctx.store.jobs.worker_counts([j.job for j in jobs])
    return JSON({"jobs": [dict(j.to_dict(), workers=counts.get(j.job, 0)) for j in jobs], "next_cursor": nxt})


@router.post(
    "/jp/v1/jobs",
    summary="Register a job (idempotent: an existing job of the same project is returned, with the config keys and "
    "tags given added)",
    openapi_extra=_json_body(_EDITABLE, ("job",), job={"type": "string"}, project={"type": "string"}),
)
async def create_job(request: Request, key: ApiKey = Depends(caller)) -> JSON:
    ctx = context(request)
    body = await _json(request)
    if not isinstance(body, dict):
        raise BadRequest("body must be a JSON object", field="body")
    job_id = check_job(body.pop("job", None))
    project = body.pop("project", None)
    if project is None:
        visible = key.visible_projects()
        if visible is None or len(visible) != 1:
            raise BadRequest("'project' is required", field="project")
        project = visible[0]
    check_project(project)
    at = _at(body)
    fields = _changes(body, _EDITABLE)
    ctx.access.check(key, "write", project=project)
    job = Job(job=job_id, project=project, name=fields.pop("name", job_id), **fields)
    created_job, created = await run_in_threadpool(ctx.store.jobs.register, job, at)
    ctx.access.forget_job(job_id)
    return JSON({"job": created_job.to_dict(), "created": created}, status_code=201 if created else 200)


@router.get("/jp/v1/jobs/{job}", summary="One job with its workers")
def get_job(request: Request, job: str, key: ApiKey = Depends(caller)) -> JSON:
    ctx = context(request)
    found = ctx.access.job(key, job)
    return JSON({"job": found.to_dict(), "workers": [w.to_dict() for w in ctx.store.jobs.workers(job)]})


@router.patch(
    "/jp/v1/jobs/{job}",
    summary="Change a job's status, name, tags, error message or description",
    openapi_extra=_json_body(_EDITABLE),
)
async def update_job(request: Request, job: str, key: ApiKey = Depends(caller)) -> JSON:
    ctx = context(request)
    body = await _json(request)
    at = _at(body)
    changes = _changes(body, _EDITABLE)
    await run_in_threadpool(ctx.access.job, key, job, "write")
    updated = await run_in_threadpool(ctx.store.jobs.update, job, changes, at)
    ctx.access.forget_job(job)
    return JSON({"job": updated.to_dict()})


@router.delete("/jp/v1/jobs/{job}", summary="Delete a job and all its data and files")
def delete_job(request: Request, job: str, key: ApiKey = Depends(caller)) -> JSON:
    ctx = context(request)
    ctx.access.job(key, job, "admin" if key.role == "admin" else "write")
    ctx.store.jobs.delete(job)
    ctx.files.delete_job(job)
    ctx.access.forget_job(job)
    return JSON({"deleted": job})


@router.get("/jp/v1/jobs/{job}/workers", summary="Workers of a job: status, exit code, times, place")
def list_workers(request: Request, job: str, key: ApiKey = Depends(caller)) -> JSON:
    ctx = context(request)
    ctx.access.require(key, job)
    return JSON({"workers": [w.to_dict() for w in ctx.store.jobs.workers(job)]})


@router.put(
    "/jp/v1/jobs/{job}/workers/{worker}",
    summary="Register a worker or change its status",
    openapi_extra=_json_body(_WORKER_EDITABLE),
)
async def put_worker(request: Request, job: str, worker: str, key: ApiKey = Depends(caller)) -> JSON:
    ctx = context(request)
    check_worker(worker)
    body = await _json(request)
    at = _at(body)
    changes = check_placement(_changes(body, _WORKER_EDITABLE))
    await run_in_threadpool(ctx.access.job, key, job, "write")
    found = await run_in_threadpool(ctx.store.jobs.set_worker, job, worker, changes, at)
    ctx.access.forget_job(job)
    return JSON({"worker": found.to_dict()})


@router.get("/jp/v1/jobs/{job}/usage", summary="Storage used by a job: rows and bytes per kind, and files")
def job_usage(request: Request, job: str, key: ApiKey = Depends(caller)) -> JSON:
    ctx = context(request)
    ctx.access.require(key, job)
    usage = ctx.store.usage.job(job)
    usage["files"] = ctx.files.usage(job)
    return JSON(usage)
