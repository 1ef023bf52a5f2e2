"""Fields of a task edited one item at a time: requirements, artifacts, models, hyperparameters, configuration.

They are kept in the job's ``config["clearml"]`` like the rest of the task (see :mod:`.mapping`).
"""

from __future__ import annotations

import copy
from typing import Any

from ...store import Job
from . import mapping
from .dispatch import Call
from .params import flag, objects, required, strings, text
from .params import mapping as obj


def _get(call: Call) -> Job:
    return mapping.job_for(call.ctx, call.caller, required(call.data, "task"), "write")


def _write(call: Call, job: Job) -> None:
    call.ctx.store.jobs.write(job)
    call.ctx.access.forget_job(job.job)


def set_requirements(call: Call) -> dict[str, Any]:
    job = _get(call)
    requirements = obj(call.data, "requirements") or {}
    script = mapping.clearml(job).setdefault("script", {})
    script["requirements"] = requirements
    _write(call, job)
    return {"updated": 1, "fields": {}}


def _named_items(call: Call, job: Job, section: tuple[str, ...], items_field: str, key_of: Any) -> int:
    """Add or replace the items of a list field (artifacts, models) by their key."""
    items = objects(call.data, items_field, required_=True) or []
    stored = mapping.clearml(job)
    parent = stored.setdefault(section[0], {}) if len(section) > 1 else stored
    current = parent.setdefault(section[-1], [])
    for item in items:
        current[:] = [c for c in current if key_of(c) != key_of(item)]
        current.append(copy.deepcopy(item))
    _write(call, job)
    return len(items)


def add_or_update_artifacts(call: Call) -> dict[str, Any]:
    job = _get(call)
    count = _named_items(
        call, job, ("execution", "artifacts"), "artifacts", lambda a: (a.get("key"), a.get("mode", "output"))
    )
    return {"updated": count}


def delete_artifacts(call: Call) -> dict[str, Any]:
    job = _get(call)
    keys = {(a.get("key"), a.get("mode", "output")) for a in objects(call.data, "artifacts", required_=True) or []}
    artifacts = mapping.clearml(job).setdefault("execution", {}).setdefault("artifacts", [])
    before = len(artifacts)
    artifacts[:] = [a for a in artifacts if (a.get("key"), a.get("mode", "output")) not in keys]
    _write(call, job)
    return {"deleted": before - len(artifacts)}


def add_or_update_model(call: Call) -> dict[str, Any]:
    job = _get(call)
    kind = call.data.get("type", "output")
    item = {
        "name": text(call.data, "name", required_=True),
        "model": text(call.data, "model", required_=True),
    }
    models = mapping.clearml(job).setdefault("models", {"input": [], "output": []})
    current = models.setdefault("input" if kind == "input" else "output", [])
    current[:] = [m for m in current if m.get("name") != item["name"]] + [item]
    _write(call, job)
    return {"updated": 1}


def edit_hyper_params(call: Call) -> dict[str, Any]:
    job = _get(call)
    replace = call.data.get("replace_hyperparams", "none")
    params = mapping.clearml(job).setdefault("hyperparams", {})
    if replace == "all":
        params.clear()
    touched: set[str] = set()
    for item in objects(call.data, "hyperparams", required_=True) or []:
        section = item.get("section", "")
        if replace == "section" and section not in touched:
            params[section] = {}
        touched.add(section)
        params.setdefault(section, {})[item.get("name", "")] = copy.deepcopy(item)
    _write(call, job)
    return {"updated": 1}


def delete_hyper_params(call: Call) -> dict[str, Any]:
    job = _get(call)
    params = mapping.clearml(job).setdefault("hyperparams", {})
    deleted = 0
    for item in objects(call.data, "hyperparams", required_=True) or []:
        section = params.get(item.get("section", ""), {})
        if item.get("name") is None:
            deleted += len(section)
            params.pop(item.get("section", ""), None)
        elif section.pop(item["name"], None) is not None:
            deleted += 1
    _write(call, job)
    return {"deleted": deleted}


def get_hyper_params(call: Call) -> dict[str, Any]:
    jobs = mapping.jobs_for(call.ctx, call.caller, strings(call.data, "tasks", required_=True) or [])
    return {
        "params": [
            {
                "task": job_id,
                "hyperparams": [
                    p for section in mapping.clearml(job).get("hyperparams", {}).values() for p in section.values()
                ],
            }
            for job_id, job in jobs.items()
        ]
    }


def edit_configuration(call: Call) -> dict[str, Any]:
    job = _get(call)
    configuration = mapping.clearml(job).setdefault("configuration", {})
    if flag(call.data, "replace_configuration"):
        configuration.clear()
    for item in objects(call.data, "configuration", required_=True) or []:
        configuration[item.get("name", "")] = copy.deepcopy(item)
    _write(call, job)
    return {"updated": 1}


def get_configurations(call: Call) -> dict[str, Any]:
    jobs = mapping.jobs_for(call.ctx, call.caller, strings(call.data, "tasks", required_=True) or [])
    names = strings(call.data, "names")
    return {
        "configurations": [
            {
                "task": job_id,
                "configuration": [
                    c for n, c in mapping.clearml(job).get("configuration", {}).items() if not names or n in names
                ],
            }
            for job_id, job in jobs.items()
        ]
    }
