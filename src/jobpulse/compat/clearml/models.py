"""The models service: the output and input models a ClearML script registers.

A model is a jobpulse job tagged ``clearml-model`` in the project of its task (see :mod:`.mapping`), so model
events (``model_event: true``) have a job to be stored under and are read back with ``model_events``.
"""

from __future__ import annotations

import copy
from typing import Any

from ...store import Job
from ...store.identity import now_ms
from . import mapping
from .dispatch import Call
from .params import flag, integer, objects, required, strings, text
from .task_reads import name_search, project_fields
from .versions import Registry

FIELDS = (
    "uri",
    "framework",
    "design",
    "labels",
    "comment",
    "parent",
    "task",
    "system_tags",
    "metadata",
    "ready",
    "ui_cache",
)


def model_dict(job: Job) -> dict[str, Any]:
    fields = mapping.clearml(job)
    return {
        "id": job.job,
        "name": job.name,
        "user": fields.get("user", ""),
        "company": "jobpulse",
        "created": mapping.iso(job.created),
        "last_update": mapping.iso(job.updated),
        "project": job.project,
        "tags": [t for t in job.tags if t != mapping.MODEL_TAG],
        "system_tags": fields.get("system_tags", []),
        "task": fields.get("task"),
        "parent": fields.get("parent"),
        "comment": fields.get("comment", ""),
        "framework": fields.get("framework"),
        "design": fields.get("design", {}),
        "labels": fields.get("labels", {}),
        "uri": fields.get("uri"),
        "ready": bool(fields.get("ready", False)) or job.locked,
        "metadata": fields.get("metadata", {}),
        "last_iteration": fields.get("last_iteration", 0),
        "last_update_iteration": fields.get("last_iteration", 0),
    }


def _write(call: Call, job: Job) -> None:
    """Store a changed model or task; the server forgets what it remembered of it (its published state too)."""
    call.ctx.store.jobs.write(job)
    call.ctx.access.forget_job(job.job)


def _get(call: Call, role: str = "read") -> Job:
    return mapping.job_for(call.ctx, call.caller, required(call.data, "model"), role, model=True)


def _apply(job: Job, data: dict[str, Any]) -> dict[str, Any]:
    fields = mapping.clearml(job)
    changed = {}
    for name in FIELDS:
        if name in data:
            fields[name] = changed[name] = copy.deepcopy(data[name])
    if "name" in data and data["name"]:
        job.name = changed["name"] = str(data["name"])[:1000]
    if "tags" in data:
        job.tags = [*(strings(data, "tags") or []), mapping.MODEL_TAG]
        changed["tags"] = job.tags[:-1]
    if "iteration" in data:
        fields["last_iteration"] = integer(data, "iteration")
    job.locked = bool(fields.get("ready")) and bool(data.get("publish", False))
    return changed


def _new(call: Call, data: dict[str, Any]) -> Job:
    project = data.get("project")
    task = data.get("task")
    if not project and task:
        project = mapping.job_for(call.ctx, call.caller, task).project
    if not project:
        visible = call.caller.visible_projects()
        project = visible[0] if visible and len(visible) == 1 else "default"
    project = mapping.check_project_id(project)
    call.ctx.access.check(call.caller, "write", project=project)
    job = Job(
        job=mapping.new_id(),
        project=project,
        name=str(data.get("name") or "model")[:1000],
        status="completed",
        tags=[mapping.MODEL_TAG],
        created=now_ms(),
        started=now_ms(),
        ended=now_ms(),
        config={"clearml": {"object": "model", "user": call.caller.key_id}},
    )
    _apply(job, data)
    call.ctx.store.jobs.create(job)
    return job


def create(call: Call) -> dict[str, Any]:
    text(call.data, "uri", required_=True, max_len=4096)
    job = _new(call, call.data)
    return {"id": job.job, "created": True}


def update_for_task(call: Call) -> dict[str, Any]:
    """Register (or, with ``override_model_id``, update) the output model of a task."""
    task = mapping.job_for(call.ctx, call.caller, required(call.data, "task"), "write")
    override = call.data.get("override_model_id")
    if override:
        job = mapping.job_for(call.ctx, call.caller, override, "write", model=True)
        _apply(job, call.data)
        _write(call, job)
        created = False
    else:
        job = _new(call, {**call.data, "project": task.project, "task": task.job})
        created = True
    models = mapping.clearml(task).setdefault("models", {"input": [], "output": []})
    output = models.setdefault("output", [])
    name = call.data.get("name") or job.name
    output[:] = [m for m in output if m.get("model") != job.job] + [{"name": name, "model": job.job}]
    _write(call, task)
    return {"id": job.job, "created": created, "updated": 0 if created else 1}


def get_by_id(call: Call) -> dict[str, Any]:
    return {"model": model_dict(_get(call))}


def get_all(call: Call) -> dict[str, Any]:
    ids = strings(call.data, "id")
    key = call.caller
    if ids:
        found = call.ctx.store.jobs.get_many(ids)
        jobs = [found[i] for i in ids if i in found and key.allows_project(found[i].project)]
    else:
        projects = strings(call.data, "project")
        visible = key.visible_projects()
        scope = [p for p in projects if visible is None or p in visible] if projects else visible
        jobs = call.ctx.store.jobs.list(
            scope,
            tag=mapping.MODEL_TAG,
            limit=integer(call.data, "page_size", 500, minimum=1, maximum=10_000),
        )
    jobs = [j for j in jobs if mapping.is_model(j)]
    models = [model_dict(j) for j in jobs]
    for name in ("task", "framework"):
        wanted = strings(call.data, name)
        if wanted:
            models = [m for m in models if m[name] in wanted]
    if call.data.get("ready") is not None:
        ready = flag(call.data, "ready")
        models = [m for m in models if m["ready"] == ready]
    name = text(call.data, "name")
    if name:
        search = name_search(name)
        models = [m for m in models if search(m["name"])]
    only = strings(call.data, "only_fields")
    return {"models": [project_fields(m, only) for m in models]}


def edit(call: Call) -> dict[str, Any]:
    job = _get(call, "write")
    changed = _apply(job, call.data)
    _write(call, job)
    return {"updated": 1, "fields": changed}


def set_ready(call: Call) -> dict[str, Any]:
    job = _get(call, "write")
    mapping.clearml(job)["ready"] = True
    job.locked = flag(call.data, "publish_task", True)
    _write(call, job)
    return {"updated": 1, "published_task": None}


def add_or_update_metadata(call: Call) -> dict[str, Any]:
    job = _get(call, "write")
    metadata = mapping.clearml(job).setdefault("metadata", {})
    if flag(call.data, "replace_metadata"):
        metadata.clear()
    for item in objects(call.data, "metadata", required_=True) or []:
        metadata[str(item.get("key", ""))] = copy.deepcopy(item)
    _write(call, job)
    return {"updated": 1}


def _archive(call: Call, archived: bool) -> dict[str, Any]:
    ids = strings(call.data, "ids", required_=True) or []
    jobs = mapping.jobs_for(call.ctx, call.caller, ids, model=True)
    for job in jobs.values():
        call.ctx.access.check(call.caller, "write", project=job.project)
        tags = [t for t in mapping.clearml(job).get("system_tags", []) if t != "archived"]
        mapping.clearml(job)["system_tags"] = [*tags, "archived"] if archived else tags
        _write(call, job)
    return {"succeeded": [{"id": i, "updated": 1} for i in jobs], "failed": []}


def archive_many(call: Call) -> dict[str, Any]:
    return _archive(call, True)


def unarchive_many(call: Call) -> dict[str, Any]:
    return _archive(call, False)


def delete(call: Call) -> dict[str, Any]:
    job = _get(call, "write")
    call.ctx.store.jobs.delete(job.job)
    call.ctx.access.forget_job(job.job)
    call.ctx.files.delete_job(job.job)
    return {"deleted": True, "url": mapping.clearml(job).get("uri")}


def install(registry: Registry) -> None:
    for name, handler in (
        ("create", create),
        ("update_for_task", update_for_task),
        ("get_by_id", get_by_id),
        ("get_all", get_all),
        ("get_all_ex", get_all),
        ("edit", edit),
        ("update", edit),
        ("set_ready", set_ready),
        ("add_or_update_metadata", add_or_update_metadata),
        ("archive_many", archive_many),
        ("unarchive_many", unarchive_many),
        ("delete", delete),
    ):
        registry.add(f"models.{name}", "2.1 2.23", handler)
