"""The tasks service, as far as ClearML clients need it to run and report a task against jobpulse.

Tasks are jobpulse jobs (see :mod:`.mapping`). Creating, reading, listing, editing and the status changes a
running script makes (started, ping, completed, stopped, failed, close, publish, reset) work, and so do
hyperparameters, configuration, requirements, artifacts and models of a task. jobpulse runs no tasks itself:
``enqueue``, ``dequeue`` and ``clone`` answer 400/1 (not supported).
"""

from __future__ import annotations

import copy
from typing import Any

from ...store import Job
from ...store.identity import now_ms
from . import mapping
from .dispatch import Call
from .envelope import INVALID_TASK_STATUS, INVALID_TASK_TYPE, NOT_SUPPORTED, ClearmlError
from .params import flag, required, strings, text
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
from .task_reads import get_all, get_by_id
from .task_results import file_urls
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


def _get(call: Call, role: str = "read") -> Job:
    return mapping.job_for(call.ctx, call.caller, required(call.data, "task"), role)


def _write(call: Call, job: Job) -> None:
    call.ctx.store.jobs.write(job)
    call.ctx.access.forget_job(job.job)


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
    urls = file_urls(call, job) if flag(call.data, "return_file_urls") else None
    deleted = call.ctx.store.events.timeline_count(job.job, ("scalar", "vector", "plot", "image", "log"))
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
        "events": {"deleted": deleted},
        "deleted_models": 0,
        "urls": urls,
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
    urls = file_urls(call, job) if flag(call.data, "return_file_urls") else None
    deleted = call.ctx.store.events.timeline_count(job.job, ("scalar", "vector", "plot", "image", "log"))
    call.ctx.store.jobs.delete(job.job)
    call.ctx.access.forget_job(job.job)
    call.ctx.files.delete_job(job.job)
    return {
        "deleted": True,
        "updated_children": 0,
        "updated_models": 0,
        "events": {"deleted": deleted},
        "urls": urls,
    }


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
