"""Training scalars: downsampled charts (and, from ``ScalarReads``, the catalogue, full-resolution pages and latest
values). A chart shows the leader's series by default, every worker's, or their envelope (``ranks.py``)."""

from __future__ import annotations

import math
import re
from typing import Any, Literal

import pyarrow as pa
import pyarrow.compute as pc

from ..errors import BadRequest
from . import ranks
from .catalogue import Catalogue
from .changes import Changes
from .chart_recent import RecentCharts
from .engine import Engine
from .memory import Memory, copy_series
from .ranks import Extent, JobLeaders, Series
from .rollup_sql import ROLLUP_LEVELS
from .scalar_reads import MAX_PAGE, ONLY_SERIES, POINT_FIELDS, ScalarReads, series_where
from .series import split_series

Axis = Literal["iter", "time"]
_BUCKET_VALUES = ("mean", "min", "max", "last", "count", "x_first", "x_last")
_PARAMETER = re.compile(r"\{(\w+):")  # a query parameter's name, as in {lo:Int64}
MAX_BUCKETS = 10_000
__all__ = ["MAX_BUCKETS", "MAX_PAGE", "POINT_FIELDS", "Scalars"]
Plan = tuple[str, dict[str, Any], dict[str, Any], str]  # a chart's query, its parameters, its fields, its mode


def _query_each(engine: Engine, queries: list[tuple[str, dict[str, Any]]], order: str) -> list[pa.Table]:
    """The answer of each (sql, params) of ``queries``, read by one query: a single one as it is, several as the
    ``UNION ALL`` of theirs (each row marked with its query's index, parameters renamed apart) ordered by ``k``
    and then ``order``, split again by query."""
    if len(queries) == 1:
        sql, params = queries[0]
        return [engine.query(sql, params)]
    parts, params = [], {}
    for i, (sql, own) in enumerate(queries):
        renamed = _PARAMETER.sub(lambda m, i=i: f"{{q{i}_{m.group(1)}:", sql)
        parts.append(f"SELECT toUInt16({i}) AS k, * FROM ({renamed})")
        params.update({f"q{i}_{name}": value for name, value in own.items()})
    # wrapped, so that the ORDER BY orders every row (after a bare UNION ALL it orders only the last query's)
    table = engine.query(f"SELECT * FROM ({' UNION ALL '.join(parts)}) ORDER BY k, {order}", params)
    k = table.column("k")
    return [table.filter(pc.equal(k, i)) for i in range(len(queries))]


def _x_expr(axis: Axis) -> str:
    return "iter" if axis == "iter" else "toUnixTimestamp64Milli(ts)"


class Scalars(ScalarReads):
    def __init__(
        self,
        engine: Engine,
        db: str,
        changes: Changes,
        catalogue: Catalogue,
        *,
        remembered: int = 128,
        recent: RecentCharts | None = None,
        job_leaders: JobLeaders | None = None,
    ) -> None:
        """``recent``: the coarse blocks of the chart rollup kept in memory, which charts are computed from where
        it holds them; ``job_leaders``: the ``leader`` field of each of some jobs (``ranks.py``)."""
        super().__init__(engine, db, catalogue, job_leaders)
        self._recent = recent
        self._changes = changes
        self._memory = Memory(remembered)

    def _extents(
        self, jobs: list[str], series: list[tuple[str, list[str] | None]], axis: Axis
    ) -> list[tuple[int, int, tuple, dict[Series, Extent]] | None]:
        """The x extent, a version and the series per worker with their extents of each (metric, variants) of
        ``series``, read by one query: their point counts and last insert time change with every point stored (a
        new one, a replacement, a report after the job's data was deleted). None for a series without points."""
        if not series:
            return []
        lo, hi = ("first_iter", "last_iter") if axis == "iter" else ("first_ts", "last_ts")
        conv = "" if axis == "iter" else "toUnixTimestamp64Milli"
        queries = []
        for metric, variants in series:
            where, params = series_where(jobs, metric, variants)
            sql = (
                f"SELECT {conv}(min({lo})) AS lo, {conv}(max({hi})) AS hi, count() AS n, sum(points) AS points, "
                f"toUnixTimestamp64Micro(max(tupleElement(last, 2))) AS inserted, min(first_iter) AS i0, "
                f"max(last_iter) AS i1, groupArray((job, variant, toString(worker), first_iter, last_iter, "
                f"toUnixTimestamp64Milli(first_ts), toUnixTimestamp64Milli(last_ts))) AS parts "
                f"FROM {self._db}.scalars_latest WHERE {where}"
            )
            queries.append((sql, params))
        rows = [table.to_pylist()[0] for table in _query_each(self._engine, queries, "n")]
        return [
            (
                int(row["lo"]),
                int(row["hi"]),
                (row["points"], row["inserted"], row["i0"], row["i1"]),
                _merged_parts(metric, row["parts"]),
            )
            if row["n"] and row["lo"] is not None
            else None
            for (metric, _), row in zip(series, rows, strict=True)
        ]

    def chart(
        self,
        jobs: list[str],
        metric: str,
        *,
        variants: list[str] | None = None,
        axis: Axis = "iter",
        buckets: int = 1000,
        x_min: int | None = None,
        x_max: int | None = None,
        workers: str = "leader",
        worker: str | None = None,
    ) -> dict[str, Any]:
        """About ``buckets`` buckets of one shared width over one x-range for every job and variant.

        Each job and variant shows its leader's series (``workers`` ``leader``), one series per worker (``all``,
        each naming its ``worker``), or their envelope (``envelope``: per bucket ``min``, ``median`` and ``max``
        of the workers' means, and how many ``workers`` have one); ``worker`` names one worker to show instead.

        Each bucket carries the mean, min and max of its finite values, its last value (by x) and
        its point count, so a spike inside a bucket stays visible. A chart asked for again while its
        jobs' data is unchanged is answered from this process's memory of recent charts: the version
        is the store's count of writes to the jobs where it sees every write (no query at all; the
        extent then comes from the catalogue of the jobs' series), else the series' points and last
        insert, read with the extent (one small query). Wide buckets are
        read from the rollup's blocks (the range then starts on a block boundary and the width is a
        whole number of blocks), so the cost follows the number of buckets, not the history's length; the
        coarse blocks of jobs this store wrote are kept in its memory (``chart_recent.py``), and a chart
        reading them is computed without a query.
        """
        asked = [(metric, variants, x_min, x_max)]
        return self.charts(jobs, asked, axis=axis, buckets=buckets, workers=workers, worker=worker)[0]

    def charts(
        self,
        jobs: list[str],
        asked: list[tuple[str, list[str] | None, int | None, int | None]],
        *,
        axis: Axis = "iter",
        buckets: int = 1000,
        workers: str = "leader",
        worker: str | None = None,
    ) -> list[dict[str, Any]]:
        """``chart`` of each (metric, variants, x_min, x_max) of ``asked``; those not remembered are read together,
        by one query."""
        if not 1 <= buckets <= MAX_BUCKETS:
            raise BadRequest(f"'buckets' must be between 1 and {MAX_BUCKETS}", field="buckets")
        ranks.check_mode(workers)
        answers: list[Any] = []  # a chart, or None until read
        missing = []
        written = self._changes.version(jobs)
        # where others write too, each series' own version comes with its extent, all read by one query
        read = self._extents(jobs, [(m, v) for m, v, _, _ in asked], axis) if written is None else None
        for i, (metric, variants, x_min, x_max) in enumerate(asked):
            series = (tuple(jobs), metric, tuple(variants) if variants is not None else None)
            if read is not None:
                version, parts = (read[i][:3], read[i][3]) if read[i] is not None else (None, {})
            else:
                version, parts = written, self._remembered_parts(series, written)
            chosen = ranks.chosen(parts, workers, worker, self._job_leaders)
            extent = ranks.extent_of(parts, chosen, axis)
            if extent is None:
                answers.append({"metric": metric, "axis": axis, "range": None, "bucket_width": None, "series": []})
                continue
            only = None if chosen == set(parts) else sorted(chosen)
            key = (*series, axis, buckets, x_min, x_max, workers, tuple(only or ()))
            kept = self._memory.get(key, version)
            if kept is None:
                plan = self._planned(jobs, metric, variants, axis, buckets, (x_min, x_max), extent, only)
                missing.append((len(answers), key, version, (*plan, workers)))
            answers.append(kept)
        computed = [self._from_recent(jobs, plan) for _, _, _, plan in missing]
        read = iter(self._read_charts([m[3] for m, chart in zip(missing, computed, strict=True) if chart is None]))
        for (at, key, version, _), found in zip(missing, computed, strict=True):
            chart = found if found is not None else next(read)
            self._memory.put(key, version, chart)
            answers[at] = chart
        return [copy_series(answer) for answer in answers]

    def _from_recent(self, jobs: list[str], plan: Plan) -> dict[str, Any] | None:
        """The chart of ``plan`` (``_planned`` and its mode) computed from the blocks kept in memory, where its level
        is kept for every one of ``jobs``; else None (it is read)."""
        _, params, head, mode = plan
        if self._recent is None or "level" not in params:
            return None
        table = self._recent.chart(
            jobs,
            head["metric"],
            params.get("variants"),
            axis=params["axis"],
            level=params["level"],
            blocks=(params["blo"], params["bhi"]),
            lo=params["lo"],
            width=params["w"],
            chosen={(job, variant, worker) for job, _, variant, worker in params["only"]} if "only" in params else None,
        )
        return None if table is None else self._chart_of(table, head, mode)

    def _remembered_parts(self, series: tuple, version: tuple) -> dict[Series, Extent]:
        """The series per worker, with their extents, of ``series`` (jobs, metric, variants): from the catalogue
        where it remembers the jobs, else read once per version of the jobs."""
        jobs, metric, variants = list(series[0]), series[1], list(series[2]) if series[2] is not None else None
        found = self._catalogue.series(jobs, metric, variants)
        if found is not None:
            return found
        key = ("parts", *series)
        kept = self._memory.get(key, version)
        if kept is None:
            kept = {"parts": self._read_parts(jobs, metric, variants)}
            self._memory.put(key, version, kept)
        return kept["parts"]

    def _planned(
        self,
        jobs: list[str],
        metric: str,
        variants: list[str] | None,
        axis: Axis,
        buckets: int,
        x_range: tuple[int | None, int | None],
        extent: tuple[int, int],
        only: list[Series] | None,
    ) -> tuple[str, dict[str, Any], dict[str, Any]]:
        """The query of one chart's buckets (per job, variant and worker; of the series ``only`` where named), its
        parameters, and the chart's fields other than its series."""
        lo = extent[0] if x_range[0] is None else x_range[0]
        hi = extent[1] if x_range[1] is None else x_range[1]
        if hi < lo:
            raise BadRequest("'x_max' must not be smaller than 'x_min'", field="x_max")
        width = max(1, math.ceil((hi - lo + 1) / buckets))
        axis_id = 0 if axis == "iter" else 1
        level = max((lvl for lvl in ROLLUP_LEVELS[axis_id] if (4 << lvl) <= width), default=None)
        where, params = series_where(jobs, metric, variants)
        if only is not None:
            where += ONLY_SERIES
            params["only"] = only
        if level is not None:
            size = 1 << level
            lo = (lo // size) * size
            width = math.ceil(width / size) * size
            params.update(lo=lo, w=width, size=size, axis=axis_id, level=level, blo=lo // size, bhi=hi // size)
            sql = f"""SELECT job, variant, worker, intDiv(block * {{size:Int64}} - {{lo:Int64}}, {{w:Int64}}) AS b,
                    sum(sum) / nullIf(sum(n), 0) AS mean, min(min) AS min, max(max) AS max,
                    tupleElement(max(last), 3) AS last, sum(count) AS count,
                    min(first_x) AS x_first, max(last_x) AS x_last
                FROM {self._db}.scalars_rollup
                WHERE {where} AND axis = {{axis:UInt8}} AND level = {{level:UInt8}}
                    AND block BETWEEN {{blo:Int64}} AND {{bhi:Int64}}
                GROUP BY job, variant, worker, b HAVING sum(count) > 0 ORDER BY job, variant, worker, b"""
        else:
            x = _x_expr(axis)
            params.update(lo=lo, hi=hi, w=width)
            if axis == "time":
                where += self._iters_of_time(where, params, lo, hi)
            sql = f"""SELECT job, variant, worker, intDiv({x} - {{lo:Int64}}, {{w:Int64}}) AS b,
                    avgIfOrNull(value, isFinite(value)) AS mean, minIfOrNull(value, isFinite(value)) AS min,
                    maxIfOrNull(value, isFinite(value)) AS max, argMax(value, {x}) AS last, toInt64(count()) AS count,
                    min({x}) AS x_first, max({x}) AS x_last
                FROM {self._db}.scalars FINAL
                WHERE {where} AND {x} BETWEEN {{lo:Int64}} AND {{hi:Int64}}
                GROUP BY job, variant, worker, b ORDER BY job, variant, worker, b"""
        return sql, params, {"metric": metric, "axis": axis, "range": [lo, hi], "bucket_width": width}

    def _read_charts(self, plans: list[Plan]) -> list[dict[str, Any]]:
        """The charts of ``plans`` (``_planned`` and a mode): several by one query, a ``UNION ALL`` of theirs."""
        if not plans:
            return []
        tables = _query_each(self._engine, [(plan[0], plan[1]) for plan in plans], "job, variant, worker, b")
        return [self._chart_of(table, plan[2], plan[3]) for table, plan in zip(tables, plans, strict=True)]

    @staticmethod
    def _chart_of(table: pa.Table, head: dict[str, Any], mode: str) -> dict[str, Any]:
        """A chart: ``head`` and the series of the buckets of ``table`` (rows of job, variant, worker and bucket
        ``b``) as ``mode`` shows them (``ranks.py``)."""
        x0, width = head["range"][0], head["bucket_width"]
        series = split_series(table, ("job", "variant", "worker"), "x", x0, width, _BUCKET_VALUES)
        if mode == "envelope":
            return {**head, "series": ranks.envelope(series)}
        if mode == "leader":
            for one in series:
                del one["worker"]
        return {**head, "series": series}

    def _iters_of_time(self, where: str, params: dict[str, Any], lo: int, hi: int) -> str:
        """A condition on ``iter`` that keeps a time-range read to the iterations reported then."""
        size = 1 << ROLLUP_LEVELS[1][0]
        row = self._engine.query(
            f"""SELECT min(first_iter) AS ilo, max(last_iter) AS ihi, count() AS n FROM {self._db}.scalars_rollup
            WHERE {where} AND axis = 1 AND level = {ROLLUP_LEVELS[1][0]}
                AND block BETWEEN {lo // size} AND {hi // size}""",
            params,
        ).to_pylist()[0]
        if not row["n"]:
            return " AND 0"
        params.update(ilo=row["ilo"], ihi=row["ihi"])
        return " AND iter BETWEEN {ilo:Int64} AND {ihi:Int64}"


def _merged_parts(metric: str, rows: list[dict[str, Any]]) -> dict[Series, Extent]:
    """The summary rows (job, variant, worker, first and last iteration and time) of ``metric``, merged per series."""
    out: dict[Series, Extent] = {}
    for job, variant, worker, i0, i1, t0, t1 in (tuple(row.values()) for row in rows):
        kept = out.get((job, metric, variant, worker))
        if kept is None:
            out[(job, metric, variant, worker)] = [i0, i1, t0, t1]
        else:
            kept[:] = [min(kept[0], i0), max(kept[1], i1), min(kept[2], t0), max(kept[3], t1)]
    return out
