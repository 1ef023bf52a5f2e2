"""System metrics of a job's workers and devices."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from fastapi import APIRouter, Depends, Request
from starlette.concurrency import run_in_threadpool

from ...errors import BadRequest
from ...store import ApiKey, SeriesWindow
from ...store.system import align_start
from ..context import Context, caller, context, parse_time, split_list
from ..responses import JSON

router = APIRouter(tags=["system"])
_NICE_STEPS_S = (1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 21600, 43200, 86400)
_UNITS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
SERIES_FIELDS = ("avg", "min", "max", "last", "count")
LAST_MS = 253_402_300_799_999  # 9999-12-31T23:59:59.999Z: the latest time a range may name, and the longest step


def parse_step(value: str | None, name: str = "step") -> int | None:
    """A step like ``10s``, ``5m``, ``1h`` or plain seconds, in milliseconds."""
    if value is None or value == "":
        return None
    match = re.fullmatch(r"(\d+)(ms|s|m|h|d)?", value.strip())
    step = int(match.group(1)) * _UNITS[match.group(2) or "s"] if match and len(match.group(1)) <= 20 else 0
    if not 0 < step <= LAST_MS:
        shown = value if len(value) <= 40 else f"{value[:40]}..."
        raise BadRequest(f"'{name}' must be a positive duration like 10s, 5m or 1h, got {shown!r}", field=name)
    return step


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
    return JSON({"job": job, "series": ctx.store.system.catalog(job), "range": list(extent) if extent else None})


def range_end(value: str | None, name: str) -> int | None:
    """One end of a time range: epoch milliseconds or ISO 8601 (``parse_time``), from 1970 to the end of 9999."""
    try:
        moment = parse_time(value, name)
    except ValueError:  # more digits than Python turns into an integer
        moment = -1
    if moment is not None and not 0 <= moment <= LAST_MS:
        shown = value if len(value or "") <= 40 else f"{value[:40]}..."
        raise BadRequest(f"'{name}' must lie between 1970 and the end of 9999, got {shown!r}", field=name)
    return moment


@dataclass(frozen=True)
class _SeriesAsked:
    """A request for system series, checked: its metrics, its range as given (either end may be left to the
    job's extent), and the fields to leave out of each series."""

    metrics: list[str]
    workers: tuple[str, ...] | None
    devices: tuple[str, ...] | None
    start_ms: int | None
    end_ms: int | None
    step_ms: int | None
    left_out: frozenset[str]

    @classmethod
    def of(
        cls,
        metric: str,
        worker: str | None,
        device: str | None,
        start: str | None,
        end: str | None,
        step: str | None,
        fields: str | None,
    ) -> _SeriesAsked:
        metrics = split_list(metric)
        if not metrics:
            raise BadRequest("'metric' names at least one metric", field="metric")
        return cls(
            metrics=metrics,
            workers=tuple(split_list(worker)) or None,
            devices=None if device is None else tuple(split_list(device)) if device else ("",),
            start_ms=range_end(start, "start"),
            end_ms=range_end(end, "end"),
            step_ms=parse_step(step),
            left_out=frozenset(_left_out(fields)),
        )

    def window(self, start_ms: int, end_ms: int) -> SeriesWindow:
        """The window of [start_ms, end_ms] (the range asked, or filled from the job's extent) at the step
        asked, or at a round step showing it in at most 600 buckets."""
        if end_ms < start_ms:
            raise BadRequest("'start' must not be after 'end'", field="start")
        step_ms = self.step_ms or auto_step(end_ms - start_ms)
        # whole hours or minutes are read from a rollup
        return SeriesWindow(align_start(start_ms, step_ms), end_ms, step_ms, self.workers, self.devices)

    def answer(self, job: str, window: SeriesWindow, series: list[dict[str, Any]]) -> JSON:
        if self.left_out:
            series = [{name: values for name, values in one.items() if name not in self.left_out} for one in series]
        return JSON(
            {"job": job, "start": window.start_ms, "end": window.end_ms, "step_ms": window.step_ms, "series": series}
        )


@router.get(
    "/jp/v1/jobs/{job}/system/series",
    summary="System metric series per worker and device over [start, end] at a step",
)
async def system_series(
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
    ``count`` (a series' worker, metric, device and bucket times ``t`` always come).

    A series this replica remembers, of a job it remembers, is answered on the event loop: a dashboard that
    asks again waits for no worker thread. Anything else is computed in one."""
    ctx = context(request)
    asked = _SeriesAsked.of(metric, worker, device, start, end, step, fields)
    if asked.start_ms is not None and asked.end_ms is not None and ctx.access.require_remembered(key, job):
        window = asked.window(asked.start_ms, asked.end_ms)
        remembered = ctx.store.system.remembered_series(job, asked.metrics, window)
        if remembered is not None:
            return asked.answer(job, window, remembered)
    return await run_in_threadpool(_computed_series, ctx, key, job, asked)


def _computed_series(ctx: Context, key: ApiKey, job: str, asked: _SeriesAsked) -> JSON:
    ctx.access.require(key, job)
    start_ms, end_ms = asked.start_ms, asked.end_ms
    if start_ms is None or end_ms is None:
        extent = ctx.store.system.extent(job, list(asked.workers) if asked.workers else None)
        if extent is None:
            return JSON({"job": job, "start": start_ms, "end": end_ms, "step_ms": None, "series": []})
        start_ms = extent[0] if start_ms is None else start_ms
        end_ms = extent[1] if end_ms is None else end_ms
    window = asked.window(start_ms, end_ms)
    return asked.answer(job, window, ctx.store.system.series(job, asked.metrics, window))
