"""The projects service: create, find by name, read, update and delete ClearML projects.

A ClearML project is a jobpulse project (see :mod:`.mapping` for how names map to ids). Listing shows the
projects the caller's key sees: those created through this API and those that have jobs.
``get_unique_metric_variants`` answers the scalar metrics and variants reported by the tasks of a project
(and of its subprojects, the projects named ``<its name>/...``, unless ``include_subprojects`` is false), of
the tasks ``ids``, or of every project the key sees; with ``model_metrics``, of models instead of tasks.
"""

from __future__ import annotations

import re
from typing import Any

from ...store.identity import now_ms
from . import mapping
from .dispatch import Call
from .envelope import INVALID_PROJECT_ID, INVALID_REGEX, ClearmlError
from .params import flag, required, strings, text
from .task_reads import project_fields
from .task_results import name_hash
from .versions import Registry

PROJECT_EXISTS = (400, 801)
PROJECT_HAS_TASKS = (400, 402)
INVALID_NAME = (400, 407)


def _dict(pid: str, record: dict[str, Any] | None, updated: int | None = None) -> dict[str, Any]:
    record = record or {"name": pid}
    name = record.get("name", pid)
    return {
        "id": pid,
        "name": name,
        "basename": name.rsplit("/", 1)[-1],
        "description": record.get("description", ""),
        "tags": record.get("tags", []),
        "system_tags": record.get("system_tags", []),
        "default_output_destination": record.get("default_output_destination"),
        "created": mapping.iso(record.get("created")),
        "user": record.get("user", ""),
        "company": "jobpulse",
        "last_update": mapping.iso(updated or record.get("updated") or record.get("created")),
    }


def _visible(call: Call) -> dict[str, dict[str, Any]]:
    """Every project the caller sees, by id."""
    key = call.caller
    records = {pid: r for pid, r in mapping.project_records(call.ctx).items() if r and key.allows_project(pid)}
    out = {pid: _dict(pid, record) for pid, record in records.items()}
    for row in call.ctx.store.jobs.projects(key.visible_projects()):
        if row["project"] in out:
            out[row["project"]]["last_update"] = mapping.iso(row["updated"])
        else:
            out[row["project"]] = _dict(row["project"], None, row["updated"])
    return out


def _name_filter(pattern: str) -> Any:
    try:
        return re.compile(pattern, re.IGNORECASE).search
    except re.error as exc:
        raise ClearmlError(INVALID_REGEX, f"malformed regular expression {pattern!r}: {exc}", field="name") from None


def get_all(call: Call) -> dict[str, Any]:
    projects = list(_visible(call).values())
    ids = strings(call.data, "id")
    if ids:
        projects = [p for p in projects if p["id"] in ids]
    name = text(call.data, "name")
    if name:
        search = _name_filter(name)
        projects = [p for p in projects if search(p["name"])]
    if not flag(call.data, "search_hidden"):
        projects = [p for p in projects if "hidden" not in p["system_tags"]]
    projects.sort(key=lambda p: p["name"])
    only = strings(call.data, "only_fields")
    return {"projects": [project_fields(p, only) for p in projects]}


def get_by_id(call: Call) -> dict[str, Any]:
    pid = mapping.check_project_id(required(call.data, "project"))
    found = _visible(call).get(pid)
    if found is None:
        raise ClearmlError(INVALID_PROJECT_ID, f"invalid project id: {pid} does not exist", id=pid)
    return {"project": found}


def create(call: Call) -> dict[str, Any]:
    name = text(call.data, "name", required_=True, max_len=1000)
    assert name is not None
    if not name.strip("/ ") or "//" in name:
        raise ClearmlError(INVALID_NAME, f"invalid project name {name!r}", name=name)
    pid = mapping.project_id(name)
    call.ctx.access.check(call.caller, "write", project=pid)
    record = mapping.project_record(call.ctx, pid)
    if record:
        if record.get("name") != name:
            raise ClearmlError(
                INVALID_NAME,
                f"project name {name!r} maps to id {pid}, which is taken by {record.get('name')!r}",
                name=name,
            )
        raise ClearmlError(PROJECT_EXISTS, f"project {name!r} already exists", id=pid, name=name)
    mapping.save_project(
        call.ctx,
        pid,
        {
            "name": name,
            "description": call.data.get("description") or "",
            "tags": strings(call.data, "tags") or [],
            "system_tags": strings(call.data, "system_tags") or [],
            "default_output_destination": call.data.get("default_output_destination"),
            "created": now_ms(),
            "user": call.caller.key_id,
        },
    )
    return {"id": pid}


def update(call: Call) -> dict[str, Any]:
    pid = mapping.check_project_id(required(call.data, "project"))
    call.ctx.access.check(call.caller, "write", project=pid)
    record = mapping.project_record(call.ctx, pid) or {"name": pid, "created": now_ms()}
    fields = {}
    for name in ("name", "description", "default_output_destination"):
        if name in call.data:
            fields[name] = call.data[name]
    for name in ("tags", "system_tags"):
        if name in call.data:
            fields[name] = strings(call.data, name) or []
    record.update(fields, updated=now_ms())
    mapping.save_project(call.ctx, pid, record)
    return {"updated": 1, "fields": fields}


def delete(call: Call) -> dict[str, Any]:
    pid = mapping.check_project_id(required(call.data, "project"))
    call.ctx.access.check(call.caller, "write", project=pid)
    jobs = [row for row in call.ctx.store.jobs.projects([pid]) if row["jobs"]]
    if jobs and not flag(call.data, "force"):
        raise ClearmlError(
            PROJECT_HAS_TASKS, f"project {pid} has tasks: delete them first", id=pid, tasks=jobs[0]["jobs"]
        )
    call.ctx.store.state.set(mapping.PROJECT_STATE + pid, "")
    return {"deleted": 1, "disassociated_tasks": 0}


def _scope(call: Call) -> list[str] | None:
    """The projects whose tasks ``get_unique_metric_variants`` reads (None: every project)."""
    key = call.caller
    pid = text(call.data, "project")
    if not pid:
        return key.visible_projects()
    pid = mapping.check_project_id(pid)
    projects = [pid]
    if flag(call.data, "include_subprojects", True):
        prefix = mapping.project_name(call.ctx, pid) + "/"
        projects += [p for p, record in mapping.project_records(call.ctx).items() if record["name"].startswith(prefix)]
    return [p for p in projects if key.allows_project(p)]


def get_unique_metric_variants(call: Call) -> dict[str, Any]:
    model = flag(call.data, "model_metrics")
    ids = strings(call.data, "ids")
    variants = call.ctx.store.scalar_stats.variants
    if ids:
        jobs = mapping.jobs_for(call.ctx, call.caller, ids, model=model)
        pairs = variants(jobs=list(jobs), tag=mapping.MODEL_TAG, with_tag=model)
    else:
        call.ctx.access.check(call.caller, "read")
        pairs = variants(projects=_scope(call), tag=mapping.MODEL_TAG, with_tag=model)
    return {
        "metrics": [
            {"metric": m, "metric_hash": name_hash(m), "variant": v, "variant_hash": name_hash(v)} for m, v in pairs
        ]
    }


def install(registry: Registry) -> None:
    for name, handler in (
        ("get_all", get_all),
        ("get_all_ex", get_all),
        ("get_by_id", get_by_id),
        ("create", create),
        ("update", update),
        ("delete", delete),
    ):
        registry.add(f"projects.{name}", "2.1 2.23", handler)
    registry.add("projects.get_unique_metric_variants", "2.13", get_unique_metric_variants)
