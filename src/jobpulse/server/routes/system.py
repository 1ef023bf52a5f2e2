"""System metrics of a job's workers and devices."""

from __future__ import annotations

import re

from fastapi import APIRouter, Depends, Request

from ...errors import BadRequest
from ...store import ApiKey
from ...store.system import align_start
from ..context import caller, context, parse_time, split_list
from ..responses import JSON

router = APIRouter(tags=["system"])
_NICE_STEPS_S = (1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 21600, 43200, 86400)
_UNITS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
SERIES_FIELDS = ("avg", "min", "max", "last", "count")


def parse_step(value: str | None, name: str = "step") -> int | None:
    """A step like ``10s``, ``5m``, ``1h`` or plain seconds, in milliseconds."""
    if value is None or value == "":
        return None
    match = re.fullmatch(r"(\d+)(ms|s|m|h|d)?", value.strip())
    if not match or int(match.group(1)) == 0:
        raise BadRequest(
            f"'{name}' must be a positive duration like 10s, 5m or 1h, got {value!r}", field=name
        )
    return int(match.group(1)) * _UNITS[match.group(2) or "s"]


def auto_step(span_ms: int, points: int = 600) -> int:
    """The smallest round step that shows ``span_ms`` in at most ``points`` buckets."""
    for step in _NICE_STEPS_S:
        if span_ms / (step * 1000) <= points:
            return step * 1000
    return _NICE_STEPS_S[-1] * 1000


def _left_out(fields: str | None) -> set[str]:
    """The bucket fields a ``fields`` list leaves out of each series."""
    if fields is None:
        return set()
    wanted = set(split_list(fields))
    unknown = wanted - set(SERIES_FIELDS)
    if not wanted or unknown:
        raise BadRequest(
            f"'fields' names {', '.join(sorted(unknown)) or 'nothing'}; name some of {', '.join(SERIES_FIELDS)}",
            field="fields",
        )
    return set(SERIES_FIELDS) - wanted


@router.get("/jp/v1/jobs/{job}/system", summary="Workers, metrics and devices with system samples")
def system_catalog(request: Request, job: str, key: ApiKey = Depends(caller)) -> JSON:
    ctx = context(request)
    ctx.access.require(key, job)
    extent = ctx.store.system.extent(job)
    return JSON(
        {"job": job, "series": ctx.store.system.catalog(job), "range": list(extent) if extent else None}
    )


@router.get(
    "/jp/v1/jobs/{job}/system/series",
    summary="System metric series per worker and device over [start, end] at a step",
)
def system_series(
    request: Request,
    job: str,
    metric: str,
    worker: str | None = None,
    device: str | None = None,
    start: str | None = None,
    end: str | None = None,
    step: str | None = None,
    fields: str | None = None,
    key: ApiKey = Depends(caller),
) -> JSON:
    """``fields`` (e.g. ``avg``) answers only those of each bucket's ``avg``, ``min``, ``max``, ``last`` and
    ``count`` (a series' worker, metric, device and bucket times ``t`` always come)."""
    ctx = context(request)
    ctx.access.require(key, job)
    metrics = split_list(metric)
    if not metrics:
        raise BadRequest("'metric' names at least one metric", field="metric")
    workers = split_list(worker) or None
    start_ms, end_ms = parse_time(start, "start"), parse_time(end, "end")
    step_given = parse_step(step)
    if start_ms is None or end_ms is None:
        extent = ctx.store.system.extent(job, workers)
        if extent is None:
            return JSON({"job": job, "start": start_ms, "end": end_ms, "step_ms": None, "series": []})
        start_ms = extent[0] if start_ms is None else start_ms
        end_ms = extent[1] if end_ms is None else end_ms
    if end_ms < start_ms:
        raise BadRequest("'start' must not be after 'end'", field="start")
    step_ms = step_given or auto_step(end_ms - start_ms)
    start_ms = align_start(start_ms, step_ms)  # whole hours or minutes are read from a rollup
    devices = None if device is None else split_list(device) if device else [""]
    left_out = _left_out(fields)
    series = ctx.store.system.series(
        job, metrics, start_ms=start_ms, end_ms=end_ms, step_ms=step_ms, workers=workers, devices=devices
    )
    if left_out:
        series = [{name: values for name, values in one.items() if name not in left_out} for one in series]
    return JSON({"job": job, "start": start_ms, "end": end_ms, "step_ms": step_ms, "series": series})
