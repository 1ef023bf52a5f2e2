"""Insights: findings of jobs and projects, evaluation on demand, thresholds, webhooks and GPU waste.

A job's findings are visible to keys that read its project; evaluating a job and changing thresholds need
'write', webhooks (which send a project's findings elsewhere) 'admin'.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

import orjson
from fastapi import APIRouter, Depends, Request
from starlette.concurrency import run_in_threadpool

from ...errors import BadRequest, NotFound
from ...insights import thresholds as limits
from ...insights.alerts import FORMATS
from ...insights.service import Insights
from ...insights.waste import job_waste, project_waste
from ...store import ApiKey
from ...store.identity import check_project, now_ms
from ..context import caller, context, page_args, parse_time, split_list
from ..responses import JSON

router = APIRouter(tags=["insights"])
STATUSES = ("open", "resolved", "all")
DAY_MS = 86_400_000
SUMMARY_JOBS = 100  # a page of the jobs list is 50


def _insights(request: Request) -> Insights:
    return request.app.state.insights


def _status(status: str | None) -> str | None:
    if status is None or status == "all":
        return None
    if status not in STATUSES:
        raise BadRequest(f"'status' must be one of {', '.join(STATUSES)}", field="status")
    return status


async def _body(request: Request) -> Any:
    try:
        return orjson.loads(await request.body())
    except orjson.JSONDecodeError as exc:
        raise BadRequest(f"body is not valid JSON: {exc}", field="body") from exc


def _project(request: Request, key: ApiKey, project: str, role: str) -> None:
    check_project(project)
    context(request).access.check(key, role, project=project)


@router.get("/jp/v1/jobs/{job}/insights", summary="Findings of a job (idle GPUs, stragglers, hangs...)")
def job_insights(request: Request, job: str, status: str | None = None, key: ApiKey = Depends(caller)) -> JSON:
    ctx = context(request)
    ctx.access.require(key, job)
    findings = ctx.store.findings.of_job(job, _status(status))
    return JSON(
        {"job": job, "findings": [f.to_dict() for f in findings], "open": sum(f.ended is None for f in findings)}
    )


@router.post("/jp/v1/jobs/{job}/insights/evaluate", summary="Evaluate a job now (a finished job: over its whole run)")
def evaluate_job(request: Request, job: str, at: str | None = None, key: ApiKey = Depends(caller)) -> JSON:
    ctx = context(request)
    found = ctx.access.job(key, job, "write")
    row = {"job": job, "project": found.project, "status": found.status, "started": found.started, "ended": found.ended}
    at_ms = parse_time(at, "at")
    outcome = _insights(request).evaluate_job(row, at_ms)
    findings = ctx.store.findings.of_job(job)
    return JSON(
        {
            "job": job,
            "evaluated_at": at_ms if at_ms is not None else row["ended"] or now_ms(),
            "opened": len(outcome.opened),
            "resolved": len(outcome.resolved),
            "findings": [f.to_dict() for f in findings],
        }
    )


@router.get("/jp/v1/projects/{project}/insights", summary="Findings of a project's jobs, newest first")
def project_insights(
    request: Request,
    project: str,
    status: str | None = None,
    kind: str | None = None,
    limit: int | str = 100,
    key: ApiKey = Depends(caller),
) -> JSON:
    _project(request, key, project, "read")
    if kind is not None and kind not in limits.KINDS:
        raise BadRequest(f"'kind' must be one of {', '.join(limits.KINDS)}", field="kind")
    found = context(request).store.findings.of_project(
        project, status=_status(status), kind=kind, limit=page_args(limit)
    )
    return JSON({"project": project, "findings": [f.to_dict() for f in found]})


@router.get("/jp/v1/insights/summary", summary="Open findings per job, by severity, for the jobs named (up to 100)")
def summary(request: Request, jobs: str | None = None, key: ApiKey = Depends(caller)) -> JSON:
    ctx = context(request)
    names = split_list(jobs)
    if len(names) > SUMMARY_JOBS:
        raise BadRequest(f"'jobs' names at most {SUMMARY_JOBS} jobs", field="jobs")
    visible = {j.job for j in ctx.store.jobs.get_many(names).values() if key.allows_project(j.project)}
    counts = ctx.store.findings.open_counts(sorted(visible))
    return JSON({"jobs": {job: {"open": sum(c.values()), **c} for job, c in counts.items()}})


@router.get("/jp/v1/insights/thresholds", summary="Every threshold of the detectors: default, bounds, meaning")
def threshold_table(key: ApiKey = Depends(caller)) -> JSON:
    return JSON({"thresholds": limits.describe(), "kinds": list(limits.KINDS)})


@router.get("/jp/v1/projects/{project}/insights/thresholds", summary="A project's thresholds (defaults applied)")
def get_thresholds(request: Request, project: str, key: ApiKey = Depends(caller)) -> JSON:
    _project(request, key, project, "read")
    changed = context(request).store.insight_config.thresholds([project]).get(project, {})
    return JSON({"project": project, "thresholds": limits.effective(changed), "changed": changed})


@router.put(
    "/jp/v1/projects/{project}/insights/thresholds",
    summary="Change a project's thresholds: a JSON object of those to change; null restores a default",
)
async def put_thresholds(request: Request, project: str, key: ApiKey = Depends(caller)) -> JSON:
    _project(request, key, project, "write")
    body = await _body(request)
    if not isinstance(body, dict):
        raise BadRequest("body must be a JSON object of thresholds", field="body")
    config = context(request).store.insight_config
    current = (await run_in_threadpool(config.thresholds, [project])).get(project, {})
    changes = limits.check(body)
    merged = {name: value for name, value in {**current, **changes}.items() if value is not None}
    await run_in_threadpool(config.set_thresholds, project, merged)
    return JSON({"project": project, "thresholds": limits.effective(merged), "changed": merged})


def _webhook_fields(body: Any) -> tuple[str, str, str]:
    if not isinstance(body, dict):
        raise BadRequest("body must be a JSON object", field="body")
    unknown = set(body) - {"url", "format", "name"}
    if unknown:
        raise BadRequest(f"unknown field {sorted(unknown)[0]!r}; allowed: format, name, url", field=sorted(unknown)[0])
    url, fmt, name = body.get("url"), body.get("format", "json"), body.get("name", "")
    parts = urlsplit(url) if isinstance(url, str) else None
    if parts is None or parts.scheme not in ("http", "https") or not parts.netloc or len(url) > 2048:
        raise BadRequest("'url' must be an http:// or https:// URL of at most 2048 characters", field="url")
    if fmt not in FORMATS:
        raise BadRequest(f"'format' must be one of {', '.join(FORMATS)}", field="format")
    if not isinstance(name, str) or len(name) > 200:
        raise BadRequest("'name' must be a string of at most 200 characters", field="name")
    return url, fmt, name


@router.get("/jp/v1/projects/{project}/insights/webhooks", summary="A project's webhook destinations (admin)")
def list_webhooks(request: Request, project: str, key: ApiKey = Depends(caller)) -> JSON:
    _project(request, key, project, "admin")
    hooks = context(request).store.insight_config.webhooks(project)
    return JSON({"project": project, "webhooks": [h.to_dict() for h in hooks]})


@router.post(
    "/jp/v1/projects/{project}/insights/webhooks",
    summary="Add a webhook: {url, format: 'json' | 'slack', name}; findings that open and resolve are posted to it",
)
async def add_webhook(request: Request, project: str, key: ApiKey = Depends(caller)) -> JSON:
    _project(request, key, project, "admin")
    url, fmt, name = _webhook_fields(await _body(request))
    hook = await run_in_threadpool(context(request).store.insight_config.add_webhook, project, name, url, fmt)
    return JSON({"webhook": hook.to_dict()}, status_code=201)


def _hook(request: Request, key: ApiKey, project: str, webhook_id: str) -> Any:
    _project(request, key, project, "admin")
    hook = context(request).store.insight_config.webhook(project, webhook_id)
    if hook is None:
        raise NotFound(f"webhook {webhook_id!r} does not exist in project {project!r}", field="webhook_id")
    return hook


@router.delete("/jp/v1/projects/{project}/insights/webhooks/{webhook_id}", summary="Remove a webhook")
def delete_webhook(request: Request, project: str, webhook_id: str, key: ApiKey = Depends(caller)) -> JSON:
    hook = _hook(request, key, project, webhook_id)
    context(request).store.insight_config.delete_webhook(hook)
    return JSON({"deleted": webhook_id})


@router.post("/jp/v1/projects/{project}/insights/webhooks/{webhook_id}/test", summary="Send a test alert now")
def test_webhook(request: Request, project: str, webhook_id: str, key: ApiKey = Depends(caller)) -> JSON:
    hook = _hook(request, key, project, webhook_id)
    return JSON({"webhook_id": webhook_id, **_insights(request).alerter.send_test(hook)})


@router.get("/jp/v1/projects/{project}/insights/webhooks/{webhook_id}/deliveries", summary="Alerts sent to a webhook")
def deliveries(request: Request, project: str, webhook_id: str, key: ApiKey = Depends(caller)) -> JSON:
    hook = _hook(request, key, project, webhook_id)
    return JSON({"deliveries": context(request).store.insight_config.deliveries(hook.webhook_id)})


def _period(start: str | None, end: str | None, default_end: int, default_days: int = 7) -> tuple[int, int]:
    end_ms = parse_time(end, "end") or default_end
    start_ms = parse_time(start, "start")
    start_ms = end_ms - default_days * DAY_MS if start_ms is None else start_ms
    if start_ms > end_ms:
        raise BadRequest("'start' must not be after 'end'", field="start")
    return start_ms, end_ms


@router.get("/jp/v1/jobs/{job}/insights/waste", summary="GPU-hours of a job idle and underused over a period")
def job_gpu_waste(
    request: Request, job: str, start: str | None = None, end: str | None = None, key: ApiKey = Depends(caller)
) -> JSON:
    ctx = context(request)
    found = ctx.access.job(key, job)
    default_start = found.started if found.started is not None else found.created
    start_ms, end_ms = _period(start or str(default_start), end, found.ended or now_ms())
    return JSON(job_waste(ctx.store, job, found.project, start_ms, end_ms))


@router.get("/jp/v1/projects/{project}/insights/waste", summary="GPU-hours of a project idle and underused, per job")
def project_gpu_waste(
    request: Request,
    project: str,
    start: str | None = None,
    end: str | None = None,
    limit: int | str = 100,
    key: ApiKey = Depends(caller),
) -> JSON:
    _project(request, key, project, "read")
    start_ms, end_ms = _period(start, end, now_ms())
    return JSON(project_waste(context(request).store, project, start_ms, end_ms, page_args(limit)))
