"""The tasks service, as far as ClearML clients need it to run and report a task against jobpulse.

Tasks are jobpulse jobs (see :mod:`.mapping`). Creating, reading, listing, editing and the status changes a
running script makes (started, ping, completed, stopped, failed, close, publish, reset) work, and so do
hyperparameters, configuration, requirements, artifacts and models of a task. jobpulse runs no tasks itself:
``enqueue``, ``dequeue`` and ``clone`` answer 400/1 (not supported).
"""

from __future__ import annotations

import copy
import hashlib
import re
from typing import Any

from ...ingest.parse import ITER_MIN
from ...store import Job
from ...store.jobs import now_ms
from . import mapping
from .dispatch import Call
from .envelope import INVALID_REGEX, INVALID_TASK_STATUS, INVALID_TASK_TYPE, NOT_SUPPORTED, ClearmlError
from .params import flag, integer, required, strings, text
from .task_fields import (
    add_or_update_artifacts,
    add_or_update_model,
    delete_artifacts,
    delete_hyper_params,
    edit_configuration,
    edit_hyper_params,
    get_configurations,
    get_hyper_params,
    set_requirements,
)
from .versions import Registry

# Fields of a request that are not task fields; everything else tasks.create / tasks.edit keep as sent.
CONTROL = frozenset(
    {
        "task",
        "force",
        "method",
        "id",
        "name",
        "tags",
        "project",
        "status",
        "user",
        "company",
        "created",
        "started",
        "completed",
        "last_update",
        "last_change",
        "status_changed",
        "last_iteration",
        "last_metrics",
        "published",
        "active_duration",
    }
)
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
TASK_TYPES = (
    "training",
    "testing",
    "inference",
    "data_processing",
    "application",
    "monitor",
    "controller",
    "optimizer",
    "service",
    "qc",
    "custom",
)


def _hash(name: str) -> str:
    return hashlib.md5(name.encode()).hexdigest()  # noqa: S324 - ClearML keys last_metrics by this digest


def last_metrics(call: Call, jobs: list[str]) -> dict[str, tuple[dict[str, Any], int]]:
    """ClearML's ``last_metrics`` and ``last_iteration`` of each job, from the store's latest values."""
    out: dict[str, tuple[dict[str, Any], int]] = {job: ({}, 0) for job in jobs}
    for row in call.ctx.store.scalars.latest(jobs):
        metrics, last_iter = out[row["job"]]
        entry = {
            "metric": row["metric"],
            "variant": row["variant"],
            "value": row["value"],
            "min_value": row["min"],
            "max_value": row["max"],
            "count": row["points"],
            "timestamp": row["ts"],
        }
        if row["iter"] != ITER_MIN:
            entry["iter"] = row["iter"]
            last_iter = max(last_iter, row["iter"])
        metrics.setdefault(_hash(row["metric"]), {})[_hash(row["variant"])] = entry
        out[row["job"]] = (metrics, last_iter)
    return out


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


def _get(call: Call, role: str = "read") -> Job:
    return mapping.job_for(call.ctx, call.caller, required(call.data, "task"), role)


def _write(call: Call, job: Job) -> None:
    call.ctx.store.jobs.write(job)
    call.ctx.access.forget_job(job.job)


# -- reading -------------------------------------------------------------------------------------------------


def get_by_id(call: Call) -> dict[str, Any]:
    job = _get(call)
    return {"task": task_dict(job, last_metrics(call, [job.job])[job.job])}


def _matches(pattern: str) -> Any:
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
        search = _matches(name)
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
    metrics = last_metrics(call, [j.job for j in jobs]) if wants_metrics and jobs else {}
    return {"tasks": [project_fields(task_dict(j, metrics.get(j.job)), only) for j in jobs]}


# -- creating and editing -----------------------------------------------------------------------------------


def _stored_fields(data: dict[str, Any]) -> dict[str, Any]:
    out = {name: copy.deepcopy(value) for name, value in data.items() if name not in CONTROL}
    if "type" in out and out["type"] not in TASK_TYPES:
        raise ClearmlError(INVALID_TASK_TYPE, f"invalid task type {out['type']!r}", field="type")
    return out


def _project_of(call: Call) -> str:
    project = call.data.get("project")
    if project:
        return mapping.check_project_id(project)
    visible = call.caller.visible_projects()
    return visible[0] if visible and len(visible) == 1 else "default"


def create(call: Call) -> dict[str, Any]:
    name = text(call.data, "name", required_=True, max_len=1000)
    project = _project_of(call)
    call.ctx.access.check(call.caller, "write", project=project)
    fields = _stored_fields(call.data)
    fields.update(status="created", status_changed=now_ms(), user=call.caller.key_id)
    tags = strings(call.data, "tags") or []
    job = Job(
        job=mapping.new_id(),
        project=project,
        name=name,
        status="created",
        tags=tags,
        config={"clearml": fields},
    )
    created, _ = call.ctx.store.jobs.create(job)
    return {"id": created.job, "new_project": None}


def _editable(call: Call, job: Job) -> None:
    status = mapping.task_status(job)
    if status != "created" and not flag(call.data, "force"):
        raise ClearmlError(
            INVALID_TASK_STATUS,
            f"task {job.job} is {status}: only a created task can be edited (pass force to edit anyway)",
            id=job.job,
            status=status,
        )


def edit(call: Call) -> dict[str, Any]:
    """``tasks.edit``: replace whole fields of the task."""
    job = _get(call, "write")
    _editable(call, job)
    fields = _stored_fields(call.data)
    changed: dict[str, Any] = dict(fields)
    mapping.clearml(job).update(fields)
    if "name" in call.data:
        job.name = text(call.data, "name", max_len=1000) or job.name
        changed["name"] = job.name
    if "tags" in call.data:
        job.tags = strings(call.data, "tags") or []
        changed["tags"] = job.tags
    if call.data.get("project") and call.data["project"] != job.project:
        project = mapping.check_project_id(call.data["project"])
        call.ctx.access.check(call.caller, "write", project=project)
        job.project = changed["project"] = project
    _write(call, job)
    return {"updated": 1, "fields": changed}


def update(call: Call) -> dict[str, Any]:
    """``tasks.update``: name, tags, system_tags, comment, project of a task in any status."""
    job = _get(call, "write")
    fields = {name: call.data[name] for name in ("system_tags", "comment") if name in call.data}
    mapping.clearml(job).update(copy.deepcopy(fields))
    if "name" in call.data:
        job.name = text(call.data, "name", max_len=1000) or job.name
        fields["name"] = job.name
    if "tags" in call.data:
        job.tags = fields["tags"] = strings(call.data, "tags") or []
    _write(call, job)
    return {"updated": 1, "fields": fields}


# -- status --------------------------------------------------------------------------------------------------


def _set_status(call: Call, status: str, allowed_from: tuple[str, ...] | None = None) -> dict[str, Any]:
    job = _get(call, "write")
    current = mapping.task_status(job)
    if current == "published" and status != "published" and not flag(call.data, "force"):
        raise ClearmlError(INVALID_TASK_STATUS, f"task {job.job} is published", id=job.job, status=current)
    if allowed_from and current not in allowed_from and not flag(call.data, "force"):
        raise ClearmlError(
            INVALID_TASK_STATUS,
            f"task {job.job} is {current}; expected one of {', '.join(allowed_from)}",
            id=job.job,
            status=current,
        )
    fields = mapping.clearml(job)
    fields["status_reason"] = call.data.get("status_reason") or ""
    fields["status_message"] = call.data.get("status_message") or ""
    mapping.set_task_status(job, status)
    if status == "failed":
        job.error_message = (fields["status_reason"] or fields["status_message"] or "failed")[:10_000]
    if status == "published":
        fields["published"] = now_ms()
    if call.worker:
        fields["last_worker"] = call.worker
    _write(call, job)
    out: dict[str, Any] = {"updated": 1, "fields": {"status": status}}
    if status == "in_progress":
        out["started"] = 1
        out["fields"]["started"] = mapping.iso(job.started)
    return out


def started(call: Call) -> dict[str, Any]:
    return _set_status(call, "in_progress", ("created", "queued", "in_progress", "stopped"))


def completed(call: Call) -> dict[str, Any]:
    answer = _set_status(call, "completed")
    if flag(call.data, "publish"):
        answer = _set_status(call, "published")
    return answer


def stopped(call: Call) -> dict[str, Any]:
    return _set_status(call, "stopped")


def failed(call: Call) -> dict[str, Any]:
    return _set_status(call, "failed")


def close(call: Call) -> dict[str, Any]:
    return _set_status(call, "closed")


def publish(call: Call) -> dict[str, Any]:
    return _set_status(call, "published")


def reset(call: Call) -> dict[str, Any]:
    """Back to ``created``: runtime, output models and every reported event are dropped."""
    job = _get(call, "write")
    if job.locked and not flag(call.data, "force"):
        raise ClearmlError(INVALID_TASK_STATUS, f"task {job.job} is published: reset needs force", id=job.job)
    fields = mapping.clearml(job)
    fields["runtime"] = {}
    fields.setdefault("models", {})["output"] = []
    for name in ("published", "status_message", "status_reason"):
        fields.pop(name, None)
    mapping.set_task_status(job, "created")
    job.error_message = ""
    _write(call, job)
    call.ctx.store.jobs.delete_data(job.job)
    return {
        "updated": 1,
        "fields": {"status": "created"},
        "dequeued": {},
        "deleted_models": 0,
        "urls": {"model_urls": [], "event_urls": [], "artifact_urls": []},
    }


def ping(call: Call) -> dict[str, Any]:
    job = _get(call, "write")
    if call.worker:
        mapping.clearml(job)["last_worker"] = call.worker
    _write(call, job)
    return {}


def delete(call: Call) -> dict[str, Any]:
    job = _get(call, "write")
    if job.locked and not flag(call.data, "force"):
        raise ClearmlError(INVALID_TASK_STATUS, f"task {job.job} is published: delete needs force", id=job.job)
    call.ctx.store.jobs.delete(job.job)
    call.ctx.access.forget_job(job.job)
    call.ctx.files.delete_job(job.job)
    return {"deleted": 1, "updated_children": 0, "updated_models": 0, "events": {}, "urls": {}}


def not_supported(call: Call) -> dict[str, Any]:
    raise ClearmlError(
        NOT_SUPPORTED, f"{call.name} is not supported: jobpulse records tasks but does not queue or run them"
    )


def install(registry: Registry) -> None:
    add = registry.add
    for name, handler in (
        ("get_by_id", get_by_id),
        ("get_all", get_all),
        ("get_all_ex", get_all),
        ("create", create),
        ("edit", edit),
        ("update", update),
        ("set_requirements", set_requirements),
        ("add_or_update_artifacts", add_or_update_artifacts),
        ("delete_artifacts", delete_artifacts),
        ("add_or_update_model", add_or_update_model),
        ("edit_hyper_params", edit_hyper_params),
        ("delete_hyper_params", delete_hyper_params),
        ("get_hyper_params", get_hyper_params),
        ("edit_configuration", edit_configuration),
        ("get_configurations", get_configurations),
        ("started", started),
        ("completed", completed),
        ("stopped", stopped),
        ("stop", stopped),
        ("failed", failed),
        ("close", close),
        ("publish", publish),
        ("reset", reset),
        ("ping", ping),
        ("delete", delete),
        ("enqueue", not_supported),
        ("dequeue", not_supported),
        ("clone", not_supported),
    ):
        add(f"tasks.{name}", "2.1 2.23", handler)
