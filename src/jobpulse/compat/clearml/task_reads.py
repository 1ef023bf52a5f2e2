"""Reading tasks: ``tasks.get_by_id``, ``tasks.get_all`` (and ``get_all_ex``), and a task as ClearML answers it.

A task is answered with every field ClearML clients read: what ``tasks.create`` / ``tasks.edit`` stored in
the job's ``config["clearml"]`` (defaults where absent), the job's own name, status, project, tags and
times, and ``last_metrics`` / ``last_iteration`` (:mod:`.task_results`). ``only_fields`` keeps the fields
named (dotted paths reach into objects) and the id.
"""

from __future__ import annotations

import copy
import re
from typing import Any

from ...store import Job
from . import mapping
from .dispatch import Call
from .envelope import INVALID_REGEX, ClearmlError
from .params import integer, required, strings, text
from .task_results import last_metrics

# Kept in config["clearml"] for jobpulse's own use, answered in another form or not at all.
INTERNAL = frozenset({"object", "status", "status_changed", "user", "last_worker", "published"})
DEFAULTS: dict[str, Any] = {
    "type": "training",
    "comment": "",
    "parent": None,
    "output": {},
    "script": {},
    "container": {},
    "execution": {"parameters": {}, "artifacts": [], "model_labels": {}},
    "models": {"input": [], "output": []},
    "hyperparams": {},
    "configuration": {},
    "runtime": {},
    "system_tags": [],
    "status_message": "",
    "status_reason": "",
}


def task_dict(job: Job, metrics: tuple[dict[str, Any], int] | None = None) -> dict[str, Any]:
    fields = mapping.clearml(job)
    out: dict[str, Any] = {name: copy.deepcopy(value) for name, value in fields.items() if name not in INTERNAL}
    for name, default in DEFAULTS.items():
        out.setdefault(name, copy.deepcopy(default))
    out.update(
        {
            "id": job.job,
            "name": job.name,
            "user": fields.get("user", ""),
            "company": "jobpulse",
            "status": mapping.task_status(job),
            "project": job.project,
            "tags": list(job.tags),
            "created": mapping.iso(job.created),
            "started": mapping.iso(job.started),
            "completed": mapping.iso(job.ended),
            "last_update": mapping.iso(job.updated),
            "last_change": mapping.iso(job.updated),
            "status_changed": mapping.iso(fields.get("status_changed")),
            "last_worker": fields.get("last_worker", ""),
            "published": mapping.iso(fields.get("published")),
        }
    )
    if job.ended and job.started:
        out["active_duration"] = max(0, (job.ended - job.started) // 1000)
    if job.status == "failed" and not out["status_reason"]:
        out["status_reason"] = job.error_message
    if metrics is not None:
        out["last_metrics"], out["last_iteration"] = metrics
    return out


def project_fields(item: dict[str, Any], only: list[str] | None) -> dict[str, Any]:
    """Keep only the ``only`` fields (dotted paths reach into objects), and always the id."""
    if not only:
        return item
    out: dict[str, Any] = {"id": item.get("id")}
    for path in only:
        source, target = item, out
        parts = path.split(".")
        for part in parts[:-1]:
            source = source.get(part) if isinstance(source, dict) else None
            if not isinstance(source, dict):
                break
            target = target.setdefault(part, {})
        else:
            if isinstance(source, dict) and parts[-1] in source:
                target[parts[-1]] = source[parts[-1]]
    return out


def get_by_id(call: Call) -> dict[str, Any]:
    job = mapping.job_for(call.ctx, call.caller, required(call.data, "task"))
    return {"task": task_dict(job, last_metrics(call, [job])[job.job])}


def name_search(pattern: str) -> Any:
    try:
        return re.compile(pattern, re.IGNORECASE).search
    except re.error as exc:
        raise ClearmlError(INVALID_REGEX, f"malformed regular expression {pattern!r}: {exc}", field="name") from None


def get_all(call: Call) -> dict[str, Any]:
    data = call.data
    key = call.caller
    ids = strings(data, "id")
    projects = strings(data, "project")
    visible = key.visible_projects()
    if ids:
        found = call.ctx.store.jobs.get_many(ids)
        jobs = [found[i] for i in ids if i in found and key.allows_project(found[i].project)]
    else:
        scope = [p for p in projects if visible is None or p in visible] if projects else visible
        jobs = call.ctx.store.jobs.list(scope, limit=integer(data, "page_size", 500, minimum=1, maximum=10_000))
    jobs = [j for j in jobs if not mapping.is_model(j)]
    if projects:
        jobs = [j for j in jobs if j.project in projects]
    name = text(data, "name")
    if name:
        search = name_search(name)
        jobs = [j for j in jobs if search(j.name)]
    statuses = strings(data, "status")
    if statuses:
        jobs = [j for j in jobs if mapping.task_status(j) in statuses]
    types = strings(data, "type")
    if types:
        jobs = [j for j in jobs if mapping.clearml(j).get("type", "training") in types]
    tags = strings(data, "tags")
    if tags:
        jobs = [j for j in jobs if all(t.lstrip("-") not in j.tags if t.startswith("-") else t in j.tags for t in tags)]
    only = strings(data, "only_fields")
    wants_metrics = not only or any(f.split(".")[0] in ("last_metrics", "last_iteration") for f in only)
    metrics = last_metrics(call, jobs) if wants_metrics and jobs else {}
    return {"tasks": [project_fields(task_dict(j, metrics.get(j.job)), only) for j in jobs]}
