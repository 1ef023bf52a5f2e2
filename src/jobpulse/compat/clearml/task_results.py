"""What a task produced, as ``tasks.*`` answers it: ``last_metrics`` and the URLs of its files.

``last_metrics`` is keyed by the MD5 of the metric and of the variant, as ClearML keys it, and holds per series:
``value`` (the value reported last: the point of the latest timestamp), ``min_value`` and ``max_value`` with
the lowest iteration where each was reported, ``first_value`` (at the first iteration) with that iteration,
``mean_value`` (of the finite values), ``count`` (the points stored) and ``x_axis_label`` where the task named
the series' x axis. ``last_iteration`` is the highest iteration reported, single values left out. The figures
come from the store's summaries of the series (store/scalar_stats.py), whatever their length.

The files of a task (``return_file_urls`` of ``tasks.delete`` and ``tasks.reset``) are named in ClearML's form:
``event_urls`` (its debug images and the images its plots show), ``model_urls`` (its output models' files)
and ``artifact_urls``.
"""

from __future__ import annotations

import hashlib
from typing import Any

from ...ingest.parse import ITER_MIN
from ...store import Job
from . import mapping
from .dispatch import Call


def name_hash(name: str) -> str:
    return hashlib.md5(name.encode()).hexdigest()  # noqa: S324 - ClearML keys last_metrics by this digest


def last_metrics(call: Call, jobs: list[Job]) -> dict[str, tuple[dict[str, Any], int]]:
    """ClearML's ``last_metrics`` and ``last_iteration`` of each of ``jobs``, by job id."""
    ids = [job.job for job in jobs]
    out: dict[str, tuple[dict[str, Any], int]] = {job: ({}, 0) for job in ids}
    latest = call.ctx.store.scalars.latest(ids)
    stats = call.ctx.store.scalar_stats.of(ids) if latest else {}
    by_id = {job.job: job for job in jobs}
    for row in latest:
        job, metric, variant = row["job"], row["metric"], row["variant"]
        summary = stats.get((job, metric, variant))
        entry: dict[str, Any] = {
            "metric": metric,
            "variant": variant,
            "value": summary["recent"] if summary else row["value"],
            "min_value": row["min"],
            "min_value_iteration": summary["min_iter"] if summary else None,
            "max_value": row["max"],
            "max_value_iteration": summary["max_iter"] if summary else None,
            "first_value": summary["first_value"] if summary else None,
            "first_value_iteration": summary["first_iter"] if summary else None,
            "mean_value": summary["mean"] if summary else None,
            "count": row["points"],
        }
        label = mapping.clearml(by_id[job]).get("x_axis_labels", {}).get(metric, {}).get(variant)
        if label is not None:
            entry["x_axis_label"] = label
        metrics, last_iter = out[job]
        metrics.setdefault(name_hash(metric), {})[name_hash(variant)] = entry
        if row["iter"] != ITER_MIN:
            last_iter = max(last_iter, row["iter"])
        out[job] = (metrics, last_iter)
    return out


def file_urls(call: Call, job: Job) -> dict[str, list[str]]:
    """The URLs of the files ``job`` reported or registered, in ClearML's form."""
    fields = mapping.clearml(job)
    model_ids = [m.get("model") for m in fields.get("models", {}).get("output", []) if isinstance(m, dict)]
    models = call.ctx.store.jobs.get_many([m for m in model_ids if isinstance(m, str)]) if model_ids else {}
    model_urls = [mapping.clearml(model).get("uri") for model in models.values()]
    artifacts = fields.get("execution", {}).get("artifacts", [])
    artifact_urls = [a.get("uri") for a in artifacts if isinstance(a, dict)]
    return {
        "model_urls": sorted({url for url in model_urls if isinstance(url, str) and url}),
        "event_urls": call.ctx.store.events.urls(job.job),
        "artifact_urls": sorted({url for url in artifact_urls if isinstance(url, str) and url}),
    }
