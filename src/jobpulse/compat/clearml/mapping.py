"""How ClearML's objects map onto jobpulse's.

- **Task = job.** A ClearML task id (32 hex characters, made by ``tasks.create``) is the jobpulse job id.
  What ClearML keeps about a task (type, comment, script, hyperparameters, configuration, runtime properties,
  ClearML status and its reason, artifacts, models, ...) lives in the job's ``config`` under the ``"clearml"``
  key; the job's own ``name``, ``status``, ``tags``, ``error_message`` and ``locked`` hold the task's name,
  status, tags, failure reason and published flag, so the native API and the UI show them too. Any jobpulse
  job, also one made by the native API, can be used as a ClearML task.
- **Model = job** of the same project, tagged ``clearml-model`` and marked
  ``{"clearml": {"object": "model"}}``; model events (``model_event: true``) are stored under it.
- **Project.** A ClearML project name that is already a valid jobpulse project id (1-64 letters, digits or
  ``-``) is that project: ``demo`` is ``demo``. Any other name maps to its letters and digits joined by ``-``
  plus 10 hex digits of the name's SHA-1 (``study/project`` is ``study-project-`` + hash), so that the mapping
  is deterministic and different names never share a project. The ClearML project id *is* the jobpulse
  project id, and API keys scoped to a project give access to the ClearML project of that id. The name and
  other ClearML fields of a project are kept in the server state (``clearml.project.<id>``).
"""

from __future__ import annotations

import hashlib
import re
import uuid
from datetime import UTC, datetime
from typing import Any

import orjson

from ...errors import NotFound
from ...server.context import Context
from ...store import ApiKey, Job
from ...store.identity import JOB_ID, PROJECT_ID, now_ms
from .envelope import INVALID_MODEL_ID, INVALID_PROJECT_ID, INVALID_TASK_ID, ClearmlError

PROJECT_STATE = "clearml.project."
MODEL_TAG = "clearml-model"

# ClearML task status -> jobpulse job status, and back.
TO_JOB = {
    "created": "created",
    "queued": "created",
    "in_progress": "running",
    "stopped": "stopped",
    "closed": "completed",
    "failed": "failed",
    "completed": "completed",
    "published": "completed",
    "publishing": "completed",
    "unknown": "created",
}
TO_TASK = {
    "created": "created",
    "running": "in_progress",
    "completed": "completed",
    "failed": "failed",
    "stopped": "stopped",
}


def new_id() -> str:
    return uuid.uuid4().hex


def iso(ms: int | None) -> str | None:
    if ms is None:
        return None
    return datetime.fromtimestamp(ms / 1000, tz=UTC).isoformat(timespec="milliseconds")


def clearml(job: Job) -> dict[str, Any]:
    """The ClearML fields of ``job`` (a copy-free view; mutate and write the job to keep changes)."""
    fields = job.config.get("clearml")
    if not isinstance(fields, dict):
        fields = {}
        job.config["clearml"] = fields
    return fields


def is_model(job: Job) -> bool:
    return clearml(job).get("object") == "model"


def task_status(job: Job) -> str:
    """The ClearML status of ``job``: the one ClearML set, unless the job's status changed natively since."""
    stored = clearml(job).get("status")
    if job.locked:
        return "published"
    if isinstance(stored, str) and TO_JOB.get(stored) == job.status:
        return stored
    return TO_TASK.get(job.status, "unknown")


def set_task_status(job: Job, status: str) -> None:
    """Record a ClearML status and the matching job status and times (no transition rules: ClearML's own)."""
    clearml(job)["status"] = status
    clearml(job)["status_changed"] = now_ms()
    job_status = TO_JOB[status]
    now = now_ms()
    if job_status == "running":
        job.started = job.started or now
        job.ended = None
    elif job_status == "created":
        job.started = job.ended = None
    else:
        job.started = job.started or now
        job.ended = job.ended or now
    job.status = job_status
    job.locked = status == "published"


def check_id(value: Any, kind: str = "task") -> str:
    if not isinstance(value, str) or not JOB_ID.match(value):
        error = INVALID_MODEL_ID if kind == "model" else INVALID_TASK_ID
        raise ClearmlError(error, f"invalid {kind} id: {value!r}", id=value)
    return value


def job_for(ctx: Context, key: ApiKey, object_id: Any, role: str = "read", *, model: bool = False) -> Job:
    """The job of a task (or of a model), after the access check; 400/101 (400/201) when there is none."""
    kind = "model" if model else "task"
    object_id = check_id(object_id, kind)
    error = INVALID_MODEL_ID if model else INVALID_TASK_ID
    try:
        job = ctx.access.job(key, object_id, role)
    except NotFound:
        raise ClearmlError(error, f"invalid {kind} id: {object_id} does not exist", id=object_id) from None
    if is_model(job) != model:
        raise ClearmlError(
            error, f"invalid {kind} id: {object_id} is a {'model' if is_model(job) else 'task'}", id=object_id
        )
    return job


def jobs_for(ctx: Context, key: ApiKey, object_ids: list[str], *, model: bool = False) -> dict[str, Job]:
    """Several tasks (or models) at once; 400/101 naming the ones that do not exist for this key."""
    for object_id in object_ids:
        check_id(object_id, "model" if model else "task")
    found = ctx.store.jobs.get_many(list(dict.fromkeys(object_ids)))
    missing = [
        i
        for i in object_ids
        if i not in found or not key.allows_project(found[i].project) or is_model(found[i]) != model
    ]
    if missing:
        kind = "model" if model else "task"
        raise ClearmlError(
            INVALID_MODEL_ID if model else INVALID_TASK_ID,
            f"invalid {kind} ids: {', '.join(missing[:10])} do not exist",
            ids=missing,
        )
    ctx.access.check(key, "read")
    return found


# -- projects --------------------------------------------------------------------------------------------


def project_id(name: str) -> str:
    """The jobpulse project id of a ClearML project name (deterministic, see the module's description)."""
    if PROJECT_ID.match(name):
        return name
    slug = re.sub(r"[^A-Za-z0-9]+", "-", name).strip("-")[:48]
    digest = hashlib.sha1(name.encode()).hexdigest()[:10]
    return f"{slug}-{digest}" if slug else f"p-{digest}"


def project_record(ctx: Context, pid: str) -> dict[str, Any] | None:
    raw = ctx.store.state.get(PROJECT_STATE + pid)
    return orjson.loads(raw) if raw else None


def project_records(ctx: Context) -> dict[str, dict[str, Any]]:
    return {
        name[len(PROJECT_STATE) :]: orjson.loads(value)
        for name, value in ctx.store.state.with_prefix(PROJECT_STATE).items()
        if value
    }


def save_project(ctx: Context, pid: str, record: dict[str, Any]) -> None:
    ctx.store.state.set(PROJECT_STATE + pid, orjson.dumps(record).decode())


def project_name(ctx: Context, pid: str) -> str:
    record = project_record(ctx, pid)
    return record["name"] if record else pid


def check_project_id(value: Any) -> str:
    if not isinstance(value, str) or not PROJECT_ID.match(value):
        raise ClearmlError(INVALID_PROJECT_ID, f"invalid project id: {value!r}", id=value)
    return value


def ensure_project(ctx: Context, name: str, *, user: str = "") -> str:
    """The id of project ``name``, recording its name on first use."""
    pid = project_id(name)
    if project_record(ctx, pid) is None:
        save_project(
            ctx,
            pid,
            {
                "name": name,
                "description": "",
                "tags": [],
                "system_tags": [],
                "default_output_destination": None,
                "created": now_ms(),
                "user": user,
            },
        )
    return pid
