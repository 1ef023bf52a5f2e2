"""Training scalars and other reported events: catalogue, charts, compare, full-resolution pages, latest.

Each worker (rank) of a job reports scalar series of its own; every read shows the leader's series by default
(store/ranks.py): ``workers=all`` shows every worker's, ``workers=envelope`` (charts) their min / median / max per
bucket, ``worker=NAME`` one worker's."""

from __future__ import annotations

import asyncio
import itertools
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.compute as pc
from fastapi import APIRouter, Depends, Request
from fastapi.responses import Response
from starlette.concurrency import run_in_threadpool

from ...errors import BadRequest, NotFound
from ...store import ApiKey
from ...store.events import KINDS
from ...store.progress import ranking
from ...store.ranks import LATEST_MODES, check_mode, check_worker
from ...store.scalars import POINT_FIELDS
from ...store.series import run_starts
from ..context import Context, caller, context, page_args, split_list
from ..responses import JSON, arrow_stream, float_text, floats, wants_arrow

router = APIRouter(tags=["scalars"])
MAX_COMPARE = 100
MAX_LATEST = 5000
MAX_WORST = 1000
# beyond every stored iteration and epoch millisecond, and small enough for bucket arithmetic in 64 bits
_BOUND = 2**53 - 1
_VALUES = ("value", "min", "max")  # floats of a latest value that JSON may need as text
_JOBS_BODY = {
    "type": "object",
    "required": ["jobs"],
    "properties": {"jobs": {"type": "array", "items": {"type": "string"}, "minItems": 1, "maxItems": MAX_LATEST}},
}


def _axis(value: str) -> str:
    if value not in ("iter", "time"):
        raise BadRequest("'axis' must be 'iter' or 'time'", field="axis")
    return value


def _int(value: str | None, name: str, low: int = -_BOUND) -> int | None:
    if value is None or value == "":
        return None
    try:
        number = int(value)
    except ValueError as exc:
        raise BadRequest(f"'{name}' must be an integer", field=name) from exc
    if not low <= number <= _BOUND:
        raise BadRequest(f"'{name}' must be between {low} and {_BOUND}", field=name)
    return number


def _chart_json(chart: dict[str, Any]) -> dict[str, Any]:
    for series in chart["series"]:
        if "last" in series:  # an envelope's series has none
            series["last"] = floats(series["last"])
    return chart


@router.get(
    "/jp/v1/jobs/{job}/scalars",
    summary="Metrics and variants of a job, with point counts and extents, the workers that reported each",
)
def scalar_metrics(request: Request, job: str, key: ApiKey = Depends(caller)) -> JSON:
    ctx = context(request)
    ctx.access.require(key, job)
    return JSON({"job": job, "metrics": ctx.store.scalars.metrics(job)})


@router.get(
    "/jp/v1/jobs/{job}/scalars/chart",
    summary="A metric in N buckets over iteration or time: mean, min, max, last and count per bucket",
)
def scalar_chart(
    request: Request,
    job: str,
    metric: str,
    variant: str | None = None,
    axis: str = "iter",
    buckets: str = "1000",
    x_min: str | None = None,
    x_max: str | None = None,
    workers: str = "leader",
    worker: str | None = None,
    key: ApiKey = Depends(caller),
) -> JSON:
    """``workers``: ``leader`` (default: one series per variant, the leader's), ``all`` (one series per worker, each
    naming its ``worker``) or ``envelope`` (per bucket ``min``, ``median`` and ``max`` across workers of their
    means, and ``workers``, how many have one); ``worker`` charts that one worker's series."""
    ranks = (workers, worker)
    return _chart(context(request), key, [job], metric, variant, axis, buckets, (x_min, x_max), ranks)


@router.get("/jp/v1/scalars/chart", summary="One metric of several jobs on one shared x-range and bucket width")
def compare_chart(
    request: Request,
    jobs: str,
    metric: str,
    variant: str | None = None,
    axis: str = "iter",
    buckets: str = "1000",
    x_min: str | None = None,
    x_max: str | None = None,
    workers: str = "leader",
    worker: str | None = None,
    key: ApiKey = Depends(caller),
) -> JSON:
    ctx = context(request)
    names = split_list(jobs)
    if not 1 <= len(names) <= MAX_COMPARE:
        raise BadRequest(f"'jobs' must name 1 to {MAX_COMPARE} jobs, comma separated", field="jobs")
    return _chart(ctx, key, names, metric, variant, axis, buckets, (x_min, x_max), (workers, worker))


def _chart(
    ctx: Context,
    key: ApiKey,
    jobs: list[str],
    metric: str,
    variant: str | None,
    axis: str,
    buckets: str,
    x_range: tuple[str | None, str | None],
    ranks: tuple[str, str | None],
) -> JSON:
    for name in jobs:
        ctx.access.require(key, name)
    chart = ctx.store.scalars.chart(
        jobs,
        metric,
        variants=split_list(variant) or None,
        axis=_axis(axis),
        buckets=page_args(buckets, "buckets", 10_000),
        x_min=_int(x_range[0], "x_min"),
        x_max=_int(x_range[1], "x_max"),
        workers=ranks[0],
        worker=check_worker(ranks[1]),
    )
    return JSON(_chart_json(chart))


_POINT_TYPES = {"variant": "string", "iter": "int64", "ts": "int64", "value": "double"}


@router.get(
    "/jp/v1/jobs/{job}/scalars/points",
    summary="Every point of a metric at full resolution, paged with a signed cursor",
)
def scalar_points(
    request: Request,
    job: str,
    metric: str,
    variant: str | None = None,
    limit: str = "10000",
    cursor: str | None = None,
    fields: str | None = None,
    worker: str | None = None,
    key: ApiKey = Depends(caller),
) -> Response:
    """``fields`` (e.g. ``iter,value``) answers only those of ``variant``, ``iter``, ``ts`` and ``value``. The points
    are the leader's series of each variant, or ``worker``'s where named.

    With ``Accept: application/vnd.apache.arrow.stream`` the page is an Arrow IPC stream of those columns
    (``value`` keeps NaN and infinities as floats) whose schema metadata holds ``job``, ``metric`` and
    ``next_cursor`` (empty on the last page): no number parsing for the reader.
    """
    ctx = context(request)
    ctx.access.require(key, job)
    after = None
    if cursor:
        body = ctx.signer.verify("scalars", cursor)
        if (body["j"], body["m"], body["v"], body.get("w")) != (job, metric, variant, worker or None):
            raise BadRequest("'cursor' belongs to another query", field="cursor")
        after = (body["av"], body["ai"])
    wanted = frozenset(split_list(fields)) if fields is not None else POINT_FIELDS
    size = page_args(limit, maximum=200_000)
    points, nxt = ctx.store.scalars.page(
        job, metric, variant=variant, after=after, limit=size, fields=wanted, worker=check_worker(worker)
    )
    token = None
    if nxt is not None:
        position = {"j": job, "m": metric, "v": variant, "av": nxt[0], "ai": nxt[1]}
        token = ctx.signer.sign("scalars", {**position, **({"w": worker} if worker else {})})
    if wants_arrow(request.headers.get("accept")):
        return arrow_stream(points, _POINT_TYPES, {"job": job, "metric": metric, "next_cursor": token or ""})
    if "value" in points:
        points["value"] = floats(points["value"])
    return JSON({"job": job, "metric": metric, **points, "next_cursor": token})


@router.get("/jp/v1/jobs/{job}/progress", summary="Step progress per worker (rank): iterations, times, step rate")
def progress(
    request: Request, job: str, since: str | None = None, worst: str = "3", key: ApiKey = Depends(caller)
) -> JSON:
    """Per worker that reported scalars: ``first_iter``, ``last_iter``, ``first_ts``, ``last_ts``, ``points`` and
    ``rate`` (iterations per second since ``since``, epoch ms; default: the minute before the job's last reported
    time), and the job's ``ranking``: ``rate`` and ``last_iter`` min / median / max, and the ``worst`` slowest."""
    ctx = context(request)
    ctx.access.require(key, job)
    k = page_args(worst, "worst", MAX_WORST)
    workers = ctx.store.progress(job, _int(since, "since"))
    return JSON({"job": job, "workers": [w.to_dict() for w in workers], "ranking": ranking(workers, k)})


@router.get("/jp/v1/scalars/latest", summary="The latest value of every metric of the jobs named in ?jobs=a,b")
async def latest_get(
    request: Request, jobs: str = "", workers: str = "leader", worker: str | None = None, key: ApiKey = Depends(caller)
) -> JSON:
    """The leader's series of each metric and variant; ``workers=all`` answers a row per worker (each naming its
    ``worker``), ``worker=NAME`` that worker's rows."""
    return await _latest(context(request), key, split_list(jobs), (workers, worker))


@router.post(
    "/jp/v1/scalars/latest",
    summary='The latest value of every metric of many jobs: {"jobs": [...]}',
    openapi_extra={"requestBody": {"required": True, "content": {"application/json": {"schema": _JOBS_BODY}}}},
)
async def latest_post(
    request: Request, workers: str = "leader", worker: str | None = None, key: ApiKey = Depends(caller)
) -> JSON:
    try:
        body = orjson.loads(await request.body())
    except orjson.JSONDecodeError as exc:
        raise BadRequest(f"body is not valid JSON: {exc}", field="body") from exc
    names = body.get("jobs") if isinstance(body, dict) else None
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise BadRequest('body must be {"jobs": [job ids]}', field="jobs")
    return await _latest(context(request), key, names, (workers, worker))


async def _latest(ctx: Context, key: ApiKey, names: list[str], ranks: tuple[str, str | None]) -> JSON:
    if not 1 <= len(names) <= MAX_LATEST:
        raise BadRequest(f"'jobs' must name 1 to {MAX_LATEST} jobs", field="jobs")
    mode, worker = check_mode(ranks[0], LATEST_MODES), check_worker(ranks[1])
    # the values are read beside the jobs' projects, and answered only if the key may read every job
    values, found = await asyncio.gather(
        run_in_threadpool(ctx.store.scalars.latest_table, names, workers=mode, worker=worker),
        _projects(ctx, names),
        return_exceptions=True,
    )
    if isinstance(found, BaseException):
        raise found
    missing = [n for n in names if n not in found or not key.allows_project(found[n])]
    if missing:
        raise NotFound(f"job {missing[0]!r} does not exist", field="jobs")
    if isinstance(values, BaseException):
        raise values
    return await run_in_threadpool(_latest_answer, names, values)


async def _projects(ctx: Context, names: list[str]) -> dict[str, str]:
    """The project of each of the jobs ``names`` that exists: as this replica remembers it, else read (and then
    remembered, as single-job routes remember what they read)."""
    found = ctx.access.remembered_projects(names)
    unknown = [name for name in names if name not in found]
    if unknown:
        read = await run_in_threadpool(ctx.store.jobs.projects_of, unknown)
        for job, project in read.items():  # whether it started is not read: its next ingest looks that up once
            ctx.access.remember_job(job, project, started=False)
        found.update(read)
    return found


def _latest_answer(names: list[str], table: pa.Table) -> JSON:
    """The latest values ``table`` (rows in the order of their jobs) as answered: by job, in the order of ``names``."""
    rows = table.drop_columns(["job"]).to_pylist()
    if not all(_finite(table.column(name)) for name in _VALUES):
        for row in rows:
            for name in _VALUES:
                row[name] = float_text(row[name])
    starts = run_starts([table.column("job")]).tolist()
    jobs = table.column("job").take(pa.array(starts, pa.int64())).to_pylist()
    by_job = {job: rows[a:b] for job, (a, b) in zip(jobs, itertools.pairwise([*starts, len(rows)]), strict=True)}
    return JSON({"jobs": {name: by_job.get(name, []) for name in names}})


def _finite(column: pa.ChunkedArray) -> bool:
    """Whether every value of ``column`` is a finite number or null."""
    return pc.all(pc.fill_null(pc.is_finite(column), True)).as_py() is not False


@router.get("/jp/v1/jobs/{job}/events/{kind}/metrics", summary="Metrics and variants of vectors, plots or images")
def event_metrics(request: Request, job: str, kind: str, key: ApiKey = Depends(caller)) -> JSON:
    ctx = context(request)
    ctx.access.require(key, job)
    return JSON({"job": job, "kind": kind, "metrics": ctx.store.events.metrics(job, kind)})


@router.get("/jp/v1/jobs/{job}/events/{kind}", summary="Vectors, plots or debug images of a job")
def events(
    request: Request,
    job: str,
    kind: str,
    metric: str | None = None,
    variant: str | None = None,
    iter_min: str | None = None,
    iter_max: str | None = None,
    last: str | None = None,
    limit: str = "100",
    cursor: str | None = None,
    key: ApiKey = Depends(caller),
) -> JSON:
    ctx = context(request)
    ctx.access.require(key, job)
    if kind not in KINDS:
        raise BadRequest(f"'kind' must be one of {', '.join(KINDS)}", field="kind")
    size = page_args(limit, maximum=1000)
    after = None
    if cursor:
        body = ctx.signer.verify("events", cursor)
        after = tuple(body["a"])
    rows = ctx.store.events.read(
        job,
        kind,
        metric=metric,
        variant=variant,
        iter_min=_int(iter_min, "iter_min"),
        iter_max=_int(iter_max, "iter_max"),
        last_iters=_int(last, "last", low=1),
        limit=size,
        after=after,
    )
    for row in rows:
        payload = row.pop("payload")
        if kind == "vector":
            row["values"] = orjson.loads(payload) if payload else []
        elif kind == "plot":
            row["plot"] = orjson.loads(payload) if payload else None
        else:
            row["meta"] = orjson.loads(payload) if payload else None
    nxt = None
    if len(rows) == size:
        last_row = rows[-1]
        nxt = ctx.signer.sign(
            "events", {"a": [last_row["metric"], last_row["variant"], last_row["iter"], last_row["key"]]}
        )
    return JSON({"job": job, "kind": kind, "events": rows, "next_cursor": nxt})
