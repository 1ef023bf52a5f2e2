"""Reading scalars and vectors: histograms, raw points, latest and single values, metric catalogues.

- ``scalar_metrics_iter_histogram``: per metric and variant, ``x`` and ``y`` of at most ``samples`` points
  (default 6000) over ``key`` = ``iter`` (default), ``timestamp`` (epoch ms) or ``iso_time``. A variant with
  no more points than ``samples`` (or ``samples=0``) gives every point; otherwise the metric's x-range is cut
  into ``samples`` buckets of one width and each bucket gives its first x and the mean of its finite values (a
  bucket of one point gives that point's own x). Iterations 0-99 with ``samples=10`` give x = 0, 10, ..., 90,
  each y the mean of its ten values. Single values (iteration -2^31) are left out, as ClearML does.
- ``multi_task_scalar_metrics_iter_histogram`` (at most 100 tasks): the same, with one x-range and one bucket
  width shared by all tasks, so their curves line up.
- Raw points (``scalar_metrics_iter_raw``, ``get_scalar_metric_data``) are in :mod:`.events_points`.
- ``get_task_latest_scalar_values``: ``last_value`` (at the highest iteration) and ``last_100_value`` (the
  mean of the finite values among the last 100 iterations) of every variant, whatever their sign.
- Values are 64-bit floats; NaN and infinities are answered as null.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime
from typing import Any

import numpy as np
import orjson

from ...ingest.parse import ITER_MIN
from ...store import Job
from ...store.scalars import MAX_BUCKETS
from . import mapping
from .dispatch import Call
from .envelope import FIELDS_VALUE_ERROR, ClearmlError
from .params import choice, flag, integer, objects, required, strings, text

MAX_TASKS = 100
DEFAULT_SAMPLES = 6000
KEYS = ("iter", "timestamp", "iso_time")


def model_events(call: Call) -> bool:
    return call.since("2.22") and flag(call.data, "model_events")


def finite(value: float | None) -> float | None:
    return value if value is None or math.isfinite(value) else None


def finites(values: Any) -> list:
    return [finite(v) for v in (values.tolist() if isinstance(values, np.ndarray) else values)]


def _iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, tz=UTC).isoformat(timespec="milliseconds")


def metric_variants(call: Call, name: str = "metrics", since: str = "2.14") -> dict[str, list[str] | None] | None:
    """``metrics: [{metric, variants}]`` of a request as {metric: variants or None for all}."""
    if not call.since(since):
        return None
    items = objects(call.data, name)
    if not items:
        return None
    out: dict[str, list[str] | None] = {}
    for item in items:
        metric = item.get("metric")
        if not isinstance(metric, str):
            raise ClearmlError(FIELDS_VALUE_ERROR, f"each entry of '{name}' needs a 'metric' string", field=name)
        variants = item.get("variants") or None
        if variants is None or (metric in out and out[metric] is None):
            out[metric] = None
        else:
            out[metric] = [*(out.get(metric) or []), *variants]
    return out


# -- histograms ----------------------------------------------------------------------------------------------


def _catalogue(call: Call, jobs: list[str]) -> dict[str, dict[str, dict[str, Any]]]:
    """metric -> variant -> {points, first_iter, last_iter} over ``jobs`` (points: the largest per job)."""
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for job in jobs:
        for entry in call.ctx.store.scalars.metrics(job):
            for variant in entry["variants"]:
                seen = out.setdefault(entry["metric"], {}).setdefault(
                    variant["variant"],
                    {"points": 0, "first_iter": variant["first_iter"], "last_iter": variant["last_iter"]},
                )
                seen["points"] = max(seen["points"], variant["points"])
                seen["first_iter"] = min(seen["first_iter"], variant["first_iter"])
                seen["last_iter"] = max(seen["last_iter"], variant["last_iter"])
    return out


def _x(values: list[int], key: str) -> list:
    return [_iso(v) for v in values] if key == "iso_time" else values


def _raw(points: dict[tuple[str, str], dict[str, np.ndarray]], metric: str, variants: list[str], key: str) -> dict:
    """variant -> {x, y} of every point of ``metric``'s ``variants`` among ``points`` (``Scalars.points_of``)."""
    out: dict[str, dict[str, list]] = {}
    for variant in variants:
        found = points.get((metric, variant))
        if found is None:
            continue
        keep = found["iter"] != ITER_MIN
        xs, ys = found["iter" if key == "iter" else "ts"][keep], found["value"][keep]
        if key != "iter":
            order = np.argsort(xs, kind="stable")
            xs, ys = xs[order], ys[order]
        if len(xs):
            out[variant] = {"x": _x(xs.tolist(), key), "y": finites(ys)}
    return out


def _bucketed(
    call: Call, jobs: list[str], asked: list[tuple[str, list[str], int | None]], key: str, samples: int
) -> dict[str, dict[tuple[str, str], dict[str, list]]]:
    """metric -> (job, variant) -> {x, y}: the charts of each (metric, variants, x_min) of ``asked``, read together."""
    charts = call.ctx.store.scalars.charts(
        jobs,
        [(metric, variants, x_min, None) for metric, variants, x_min in asked],
        axis="iter" if key == "iter" else "time",
        buckets=min(samples, MAX_BUCKETS),
    )
    out: dict[str, dict[tuple[str, str], dict[str, list]]] = {}
    for (metric, _, _), chart in zip(asked, charts, strict=True):
        for series in chart["series"]:
            xs = [
                first if count == 1 else x
                for x, first, count in zip(series["x"], series["x_first"], series["count"], strict=True)
            ]
            data = {"x": _x(xs, key), "y": finites(series["mean"])}
            out.setdefault(metric, {})[(series["job"], series["variant"])] = data
    return out


def histograms(
    call: Call, jobs: list[str], samples: int, key: str, wanted: dict[str, list[str] | None] | None
) -> dict[str, dict[str, dict[str, dict]]]:
    """metric -> variant -> job -> {x, y}: the histograms of ``jobs`` on shared buckets."""
    out: dict[str, dict[str, dict[str, dict]]] = {}
    catalogue = _catalogue(call, jobs)
    chosen: dict[str, list[str]] = {}
    for metric, variants in sorted(catalogue.items()):
        if wanted is not None and metric not in wanted:
            continue
        names = sorted(
            v
            for v, info in variants.items()
            if info["last_iter"] != ITER_MIN
            and (wanted is None or wanted[metric] is None or v in (wanted[metric] or []))
        )
        if names:
            chosen[metric] = names
    # Metrics whose variants all fit in ``samples`` are sent whole: one query per job reads all of them
    # (or one per metric where together they are too many for one answer).
    whole = [
        m for m, names in chosen.items() if samples == 0 or all(catalogue[m][v]["points"] <= samples for v in names)
    ]
    scalars = call.ctx.store.scalars
    points = {job: scalars.points_of(job, [(m, v) for m in whole for v in chosen[m]]) for job in jobs}
    bucketed: list[tuple[str, list[str], int | None]] = []  # metrics charted: read together after the others
    for metric, names in chosen.items():
        variants = catalogue[metric]
        if metric in whole:
            per_job = {
                job: found if found is not None else scalars.points_of(job, [(metric, v) for v in names])
                for job, found in points.items()
            }
            if all(found is not None for found in per_job.values()):
                for job, found in per_job.items():
                    for variant, data in _raw(found, metric, names, key).items():
                        out.setdefault(metric, {}).setdefault(variant, {})[job] = data
                continue
        lows = [variants[v]["first_iter"] for v in names if variants[v]["first_iter"] != ITER_MIN]
        bucketed.append((metric, names, (min(lows) if lows else ITER_MIN + 1) if key == "iter" else None))
    for metric, charts in _bucketed(call, jobs, bucketed, key, samples or MAX_BUCKETS).items():
        for (job, variant), data in charts.items():
            out.setdefault(metric, {}).setdefault(variant, {})[job] = data
    return {metric: out[metric] for metric in chosen if metric in out}


def _samples_and_key(call: Call) -> tuple[int, str]:
    samples = integer(call.data, "samples", DEFAULT_SAMPLES, minimum=0)
    key = choice(call.data, "key", KEYS, "iter")
    return samples if samples is not None else DEFAULT_SAMPLES, key or "iter"


def labelled(job: Job, metric: str, variant: str, entry: dict[str, Any]) -> dict[str, Any]:
    """``entry`` with the x-axis label of the series, where its task reported one (``x_axis_label``)."""
    label = mapping.clearml(job).get("x_axis_labels", {}).get(metric, {}).get(variant)
    return {**entry, "x_axis_label": label} if label is not None else entry


def scalar_metrics_iter_histogram(call: Call) -> dict[str, Any]:
    job = mapping.job_for(call.ctx, call.caller, required(call.data, "task"), model=model_events(call))
    samples, key = _samples_and_key(call)
    data = histograms(call, [job.job], samples, key, metric_variants(call))
    return {
        metric: {
            variant: labelled(job, metric, variant, {"name": variant, **per_job[job.job]})
            for variant, per_job in variants.items()
        }
        for metric, variants in data.items()
    }


def _task_list(call: Call, name: str = "tasks") -> list[str]:
    ids = strings(call.data, name, required_=True, split_commas=True) or []
    if len(ids) > MAX_TASKS:
        raise ClearmlError(FIELDS_VALUE_ERROR, f"'{name}' names at most {MAX_TASKS} tasks, got {len(ids)}", field=name)
    return list(dict.fromkeys(ids))


def multi_task_scalar_metrics_iter_histogram(call: Call) -> dict[str, Any]:
    ids = _task_list(call)
    jobs = mapping.jobs_for(call.ctx, call.caller, ids, model=model_events(call))
    samples, key = _samples_and_key(call)
    data = histograms(call, ids, samples, key, metric_variants(call, since="2.22"))
    return {
        "metrics": {
            metric: {
                variant: {
                    job: labelled(jobs[job], metric, variant, {"name": jobs[job].name, **xy})
                    for job, xy in per_job.items()
                }
                for variant, per_job in variants.items()
            }
            for metric, variants in data.items()
        }
    }


# -- latest and single values --------------------------------------------------------------------------------


def get_task_latest_scalar_values(call: Call) -> dict[str, Any]:
    job = mapping.job_for(call.ctx, call.caller, required(call.data, "task"))
    store = call.ctx.store.scalars
    means = {(r["metric"], r["variant"]): r["mean"] for r in store.recent_mean(job.job, 100)}
    metrics: dict[str, list[dict[str, Any]]] = {}
    last_iter, last_ts = 0, 0
    for row in store.latest([job.job]):
        metrics.setdefault(row["metric"], []).append(
            {
                "name": row["variant"],
                "last_value": finite(row["value"]),
                "last_100_value": finite(means.get((row["metric"], row["variant"]))),
            }
        )
        if row["iter"] != ITER_MIN:
            last_iter = max(last_iter, row["iter"])
        last_ts = max(last_ts, row["ts"] or 0)
    return {
        "metrics": [{"name": m, "variants": v} for m, v in metrics.items()],
        "last_iter": last_iter,
        "name": job.name,
        "status": mapping.task_status(job),
        "last_timestamp": last_ts or None,
    }


def get_task_single_value_metrics(call: Call) -> dict[str, Any]:
    ids = _task_list(call)
    jobs = mapping.jobs_for(call.ctx, call.caller, ids, model=model_events(call))
    wanted = metric_variants(call, since="2.22")
    values: dict[str, list[dict[str, Any]]] = {job: [] for job in ids}
    for row in call.ctx.store.scalars.at_iter(ids, ITER_MIN):
        variants = wanted.get(row["metric"], []) if wanted is not None else None
        if wanted is not None and (row["metric"] not in wanted or (variants and row["variant"] not in variants)):
            continue
        values[row["job"]].append(
            {
                "metric": row["metric"],
                "variant": row["variant"],
                "value": finite(row["value"]),
                "timestamp": row["ts"],
            }
        )
    return {"tasks": [{"task": job, "task_name": jobs[job].name, "values": values[job]} for job in ids if values[job]]}


# -- catalogues ----------------------------------------------------------------------------------------------


def _variants_by_metric(call: Call, job: Job, kind: str) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    if kind == "scalar":
        for entry in call.ctx.store.scalars.metrics(job.job):
            out[entry["metric"]] = [v["variant"] for v in entry["variants"]]
    else:
        for row in call.ctx.store.events.metrics(job.job, kind):
            out.setdefault(row["metric"], []).append(row["variant"])
    return out


def get_scalar_metrics_and_variants(call: Call) -> dict[str, Any]:
    job = mapping.job_for(call.ctx, call.caller, required(call.data, "task"), model=model_events(call))
    return {"metrics": _variants_by_metric(call, job, "scalar")}


def get_vector_metrics_and_variants(call: Call) -> dict[str, Any]:
    job = mapping.job_for(call.ctx, call.caller, required(call.data, "task"), model=model_events(call))
    return {"metrics": [{"metric": m, "variants": v} for m, v in _variants_by_metric(call, job, "vector").items()]}


EVENT_KINDS = {
    "training_stats_scalar": "scalar",
    "training_stats_vector": "vector",
    "plot": "plot",
    "training_debug_image": "image",
    "log": "log",
}


def get_task_metrics(call: Call) -> dict[str, Any]:
    """The metrics each task reported events of ``event_type`` under (all types when not given); log lines
    count when they name an iteration, as on a ClearML server."""
    ids = strings(call.data, "tasks", required_=True) or []
    jobs = mapping.jobs_for(call.ctx, call.caller, ids, model=model_events(call))
    event_type = choice(call.data, "event_type", tuple(EVENT_KINDS))
    kinds = [EVENT_KINDS[event_type]] if event_type else list(EVENT_KINDS.values())
    unique = list(dict.fromkeys(ids))
    logged = call.ctx.store.logs.metrics(unique, with_iter=True) if "log" in kinds else {}
    out = []
    for task in unique:
        names: set[str] = {metric for metric, _ in logged.get(task, [])}
        for kind in kinds:
            if kind != "log":
                names.update(_variants_by_metric(call, jobs[task], kind))
        out.append({"task": task, "metrics": sorted(names)})
    return {"metrics": out}


def get_multi_task_metrics(call: Call) -> dict[str, Any]:
    """2.28: the metrics and variants the tasks (models with ``model_events``) reported events of ``event_type``
    under, all types when not given."""
    ids = list(dict.fromkeys(strings(call.data, "tasks", required_=True) or []))
    jobs = mapping.jobs_for(call.ctx, call.caller, ids, model=flag(call.data, "model_events"))
    event_type = choice(call.data, "event_type", tuple(EVENT_KINDS))
    kinds = [EVENT_KINDS[event_type]] if event_type else list(EVENT_KINDS.values())
    found: dict[str, set[str]] = {}
    for task in ids:
        for kind in kinds:
            if kind != "log":
                for metric, variants in _variants_by_metric(call, jobs[task], kind).items():
                    found.setdefault(metric, set()).update(variants)
    if "log" in kinds:
        for pairs in call.ctx.store.logs.metrics(ids).values():
            for metric, variant in pairs:
                found.setdefault(metric, set()).add(variant)
    return {"metrics": [{"metric": m, "variants": sorted(found[m])} for m in sorted(found)]}


def vector_metrics_iter_histogram(call: Call) -> dict[str, Any]:
    job = mapping.job_for(call.ctx, call.caller, required(call.data, "task"), model=model_events(call))
    metric = text(call.data, "metric", required_=True)
    variant = text(call.data, "variant", required_=True)
    iterations, vectors = [], []
    after = None
    while True:
        rows = call.ctx.store.events.read(job.job, "vector", metric=metric, variant=variant, limit=1000, after=after)
        for row in rows:
            iterations.append(row["iter"])
            vectors.append(orjson.loads(row["payload"]) if row["payload"] else [])
        if len(rows) < 1000:
            break
        after = (rows[-1]["metric"], rows[-1]["variant"], rows[-1]["iter"], rows[-1]["key"])
    return {"metric": metric, "variant": variant, "vectors": vectors, "iterations": iterations}
