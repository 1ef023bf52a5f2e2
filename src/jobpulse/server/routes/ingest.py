"""POST /jp/v1/ingest: one batch endpoint for every event kind."""

from __future__ import annotations

from fastapi import APIRouter, Request
from starlette.concurrency import run_in_threadpool

from ...errors import Forbidden, PayloadTooLarge
from ...ingest import Batch, parse_body
from ...ingest.parse import decode
from ...store import ApiKey
from ..context import Context, caller, context
from ..responses import JSON

router = APIRouter(tags=["ingest"])


async def read_body(request: Request, limit: int) -> bytes:
    """The raw body, refusing to read past ``limit`` bytes."""
    declared = request.headers.get("content-length")
    if declared and declared.isdigit() and int(declared) > limit:
        raise PayloadTooLarge(f"body is larger than {limit} bytes", field="body")
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise PayloadTooLarge(f"body is larger than {limit} bytes", field="body")
        chunks.append(chunk)
    return b"".join(chunks)


def resolve_jobs(ctx: Context, key: ApiKey, batch: Batch) -> None:
    """Give every job of the batch its project, refuse what the key may not write, register new jobs."""
    known = {job: ctx.access.started_job(job) for job in batch.jobs}
    unknown = [job for job, project in known.items() if project is None]
    stored = ctx.store.jobs.get_many(unknown) if unknown else {}
    for job_id, project in list(batch.jobs.items()):
        existing = stored[job_id].project if job_id in stored else known[job_id]
        if existing is not None:
            if project is not None and project != existing:
                for _ in range(batch.drop_job(job_id)):
                    batch.reject(
                        -1,
                        "job_in_other_project",
                        f"job {job_id!r} belongs to another project than {project!r}",
                    )
                continue
            batch.jobs[job_id] = existing
        elif project is None:
            projects = key.visible_projects()
            if projects is not None and len(projects) == 1:
                batch.jobs[job_id] = projects[0]
            else:
                for _ in range(batch.drop_job(job_id)):
                    batch.reject(-1, "missing_project", f"job {job_id!r} is new: name its 'project'")
                continue
        project = batch.jobs[job_id]
        if not key.allows_project(project) or not key.can("write"):
            raise Forbidden(f"this API key may not write to project {project!r}", field="project")
    if not batch.jobs:
        return
    fresh = {job: project for job, project in batch.jobs.items() if known[job] is None}
    starting = {job for job, found in stored.items() if found.status == "created"}
    ctx.store.jobs.ensure({j: p for j, p in fresh.items() if j not in stored or j in starting}, batch.first_ts)
    unknown = ctx.access.unknown_workers({(j, w) for j, w in batch.workers if w})
    ctx.store.jobs.ensure_workers(unknown, batch.first_ts)
    ctx.access.remember_workers(unknown)
    for job_id, project in fresh.items():
        ctx.access.remember_job(job_id, project, started=True)


@router.post("/jp/v1/ingest", summary="Store a batch of events of any kind (JSON lines, columnar or Arrow)")
async def ingest(
    request: Request,
    project: str | None = None,
    job: str | None = None,
    worker: str | None = None,
    kind: str | None = None,
) -> JSON:
    ctx = context(request)
    key = await caller(request)
    raw = await read_body(request, ctx.settings.max_body_bytes)
    data = decode(raw, request.headers.get("content-encoding"), ctx.settings.max_body_bytes)
    defaults = {"project": project, "job": job, "worker": worker, "kind": kind}
    batch = await run_in_threadpool(
        parse_body, data, request.headers.get("content-type"), defaults, max_events=ctx.settings.max_events
    )
    await run_in_threadpool(resolve_jobs, ctx, key, batch)
    if batch.accepted:
        tables = await run_in_threadpool(batch.tables)
        await ctx.committer.commit(tables)
    body = {
        "accepted": batch.accepted,
        "rejected": batch.rejected,
        "errors": dict(batch.errors),
        "examples": batch.examples,
    }
    if batch.accepted == 0:
        first = batch.examples[0] if batch.examples else {"reason": "empty", "detail": "no events"}
        body["error"] = {
            "status": 400,
            "code": "no_valid_events",
            "message": f"no event of the batch was valid; first problem: {first['detail']}",
            "field": None,
        }
        return JSON(body, status_code=400)
    return JSON(body)
