"""Training scalars: catalogue, downsampled charts, full-resolution pages and latest values."""

from __future__ import annotations

import math
import re
from typing import Any, Literal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..errors import BadRequest
from .catalogue import Catalogue
from .changes import Changes
from .chart_recent import RecentCharts
from .engine import Engine
from .memory import Memory, copy_series
from .schema import ROLLUP_LEVELS
from .series import run_starts, split_series

Axis = Literal["iter", "time"]
_BUCKET_VALUES = ("mean", "min", "max", "last", "count", "x_first", "x_last")
_PARAMETER = re.compile(r"\{(\w+):")  # a query parameter's name, as in {lo:Int64}
MAX_BUCKETS = 10_000
MAX_PAGE = 200_000
POINT_FIELDS = frozenset({"variant", "iter", "ts", "value"})


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


class Scalars:
    def __init__(
        self,
        engine: Engine,
        db: str,
        changes: Changes,
        catalogue: Catalogue,
        *,
        remembered: int = 128,
        recent: RecentCharts | None = None,
    ) -> None:
        """``recent``: the coarse blocks of the chart rollup kept in memory, which charts are computed from where
        it holds them."""
        self._recent = recent
        self._engine = engine
        self._db = db
        self._changes = changes
        self._catalogue = catalogue
        self._memory = Memory(remembered)

    def metrics(self, job: str) -> list[dict[str, Any]]:
        """Every metric of ``job`` with its variants, points and x extent."""
        rows = self._engine.query(
            f"""SELECT metric, variant, min(first_iter) AS first_iter, max(last_iter) AS last_iter,
                toUnixTimestamp64Milli(min(first_ts)) AS first_ts, toUnixTimestamp64Milli(max(last_ts)) AS last_ts,
                sum(points) AS points
            FROM {self._db}.scalars_latest WHERE job = {{job:String}}
            GROUP BY metric, variant ORDER BY metric, variant""",
            {"job": job},
        ).to_pylist()
        out: dict[str, dict[str, Any]] = {}
        for row in rows:
            entry = out.setdefault(row["metric"], {"metric": row["metric"], "variants": []})
            entry["variants"].append(
                {k: row[k] for k in ("variant", "first_iter", "last_iter", "first_ts", "last_ts", "points")}
            )
        return list(out.values())

    def _extents(
        self, jobs: list[str], series: list[tuple[str, list[str] | None]], axis: Axis
    ) -> list[tuple[int, int, tuple] | None]:
        """The x extent and a version of each (metric, variants) of ``series``, read by one query: their point
        counts and last insert time change with every point stored (a new one, a replacement, a report after the
        job's data was deleted). None for a series without points."""
        if not series:
            return []
        lo, hi = ("first_iter", "last_iter") if axis == "iter" else ("first_ts", "last_ts")
        conv = "" if axis == "iter" else "toUnixTimestamp64Milli"
        queries = []
        for metric, variants in series:
            where, params = self._where(jobs, metric, variants)
            sql = (
                f"SELECT {conv}(min({lo})) AS lo, {conv}(max({hi})) AS hi, count() AS n, sum(points) AS points, "
                f"toUnixTimestamp64Micro(max(tupleElement(last, 2))) AS inserted, min(first_iter) AS i0, "
                f"max(last_iter) AS i1 FROM {self._db}.scalars_latest WHERE {where}"
            )
            queries.append((sql, params))
        rows = [table.to_pylist()[0] for table in _query_each(self._engine, queries, "n")]
        return [
            (int(row["lo"]), int(row["hi"]), (row["points"], row["inserted"], row["i0"], row["i1"]))
            if row["n"] and row["lo"] is not None
            else None
            for row in rows
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
    ) -> dict[str, Any]:
        """About ``buckets`` buckets of one shared width over one x-range for every job and variant.

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
        return self.charts(jobs, [(metric, variants, x_min, x_max)], axis=axis, buckets=buckets)[0]

    def charts(
        self,
        jobs: list[str],
        asked: list[tuple[str, list[str] | None, int | None, int | None]],
        *,
        axis: Axis = "iter",
        buckets: int = 1000,
    ) -> list[dict[str, Any]]:
        """``chart`` of each (metric, variants, x_min, x_max) of ``asked``; those not remembered are read together,
        by one query."""
        if not 1 <= buckets <= MAX_BUCKETS:
            raise BadRequest(f"'buckets' must be between 1 and {MAX_BUCKETS}", field="buckets")
        answers: list[Any] = []  # a chart, or None until read
        missing = []
        written = self._changes.version(jobs)
        # where others write too, each series' own version comes with its extent, all read by one query
        read = self._extents(jobs, [(m, v) for m, v, _, _ in asked], axis) if written is None else None
        for i, (metric, variants, x_min, x_max) in enumerate(asked):
            series = (tuple(jobs), metric, tuple(variants) if variants is not None else None, axis)
            key = (*series, buckets, x_min, x_max)
            if read is not None:
                extent = version = read[i]
            else:
                version = written
                extent = self._remembered_extent(series, version)
            if extent is None:
                answers.append({"metric": metric, "axis": axis, "range": None, "bucket_width": None, "series": []})
                continue
            kept = self._memory.get(key, version)
            if kept is None:
                plan = self._planned(jobs, metric, variants, axis, buckets, x_min, x_max, extent[:2])
                missing.append((len(answers), key, version, plan))
            answers.append(kept)
        computed = [self._from_recent(jobs, plan) for _, _, _, plan in missing]
        read = iter(self._read_charts([m[3] for m, chart in zip(missing, computed, strict=True) if chart is None]))
        for (at, key, version, _), found in zip(missing, computed, strict=True):
            chart = found if found is not None else next(read)
            self._memory.put(key, version, chart)
            answers[at] = chart
        return [copy_series(answer) for answer in answers]

    def _from_recent(self, jobs: list[str], plan: tuple[str, dict[str, Any], dict[str, Any]]) -> dict[str, Any] | None:
        """The chart of ``plan`` (``_planned``) computed from the blocks kept in memory, where its level is kept for
        every one of ``jobs``; else None (it is read)."""
        _, params, head = plan
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
        )
        return None if table is None else self._chart_of(table, head)

    def _remembered_extent(self, series: tuple, version: tuple) -> tuple[int, ...] | None:
        """The extent of ``series`` (jobs, metric, variants, axis): from the catalogue where it remembers
        the jobs, else read once per version of the jobs."""
        jobs, metric, variants, axis = series
        variants = list(variants) if variants is not None else None
        found = self._catalogue.extent(list(jobs), metric, variants, axis)
        if found is not None:
            return found[0]
        key = ("extent", *series)
        found = self._memory.get(key, version)
        if found is None:
            found = (self._extents(list(jobs), [(metric, variants)], axis)[0],)
            self._memory.put(key, version, found)
        return found[0]

    def _planned(
        self,
        jobs: list[str],
        metric: str,
        variants: list[str] | None,
        axis: Axis,
        buckets: int,
        x_min: int | None,
        x_max: int | None,
        extent: tuple[int, int],
    ) -> tuple[str, dict[str, Any], dict[str, Any]]:
        """The query of one chart's buckets, its parameters, and the chart's fields other than its series."""
        lo = extent[0] if x_min is None else x_min
        hi = extent[1] if x_max is None else x_max
        if hi < lo:
            raise BadRequest("'x_max' must not be smaller than 'x_min'", field="x_max")
        width = max(1, math.ceil((hi - lo + 1) / buckets))
        axis_id = 0 if axis == "iter" else 1
        level = max((lvl for lvl in ROLLUP_LEVELS[axis_id] if (4 << lvl) <= width), default=None)
        where, params = self._where(jobs, metric, variants)
        if level is not None:
            size = 1 << level
            lo = (lo // size) * size
            width = math.ceil(width / size) * size
            params.update(lo=lo, w=width, size=size, axis=axis_id, level=level, blo=lo // size, bhi=hi // size)
            sql = f"""SELECT job, variant, intDiv(block * {{size:Int64}} - {{lo:Int64}}, {{w:Int64}}) AS b,
                    sum(sum) / nullIf(sum(n), 0) AS mean, min(min) AS min, max(max) AS max,
                    tupleElement(max(last), 3) AS last, sum(count) AS count,
                    min(first_x) AS x_first, max(last_x) AS x_last
                FROM {self._db}.scalars_rollup
                WHERE {where} AND axis = {{axis:UInt8}} AND level = {{level:UInt8}}
                    AND block BETWEEN {{blo:Int64}} AND {{bhi:Int64}}
                GROUP BY job, variant, b HAVING sum(count) > 0 ORDER BY job, variant, b"""
        else:
            x = _x_expr(axis)
            params.update(lo=lo, hi=hi, w=width)
            if axis == "time":
                where += self._iters_of_time(where, params, lo, hi)
            sql = f"""SELECT job, variant, intDiv({x} - {{lo:Int64}}, {{w:Int64}}) AS b,
                    avgIfOrNull(value, isFinite(value)) AS mean, minIfOrNull(value, isFinite(value)) AS min,
                    maxIfOrNull(value, isFinite(value)) AS max, argMax(value, {x}) AS last, toInt64(count()) AS count,
                    min({x}) AS x_first, max({x}) AS x_last
                FROM {self._db}.scalars FINAL
                WHERE {where} AND {x} BETWEEN {{lo:Int64}} AND {{hi:Int64}}
                GROUP BY job, variant, b ORDER BY job, variant, b"""
        return sql, params, {"metric": metric, "axis": axis, "range": [lo, hi], "bucket_width": width}

    def _read_charts(self, plans: list[tuple[str, dict[str, Any], dict[str, Any]]]) -> list[dict[str, Any]]:
        """The charts of ``plans`` (``_planned``): several by one query, a ``UNION ALL`` of theirs."""
        if not plans:
            return []
        tables = _query_each(self._engine, [(sql, params) for sql, params, _ in plans], "job, variant, b")
        return [self._chart_of(table, head) for table, (_, _, head) in zip(tables, plans, strict=True)]

    @staticmethod
    def _chart_of(table: pa.Table, head: dict[str, Any]) -> dict[str, Any]:
        """A chart: ``head`` and the series of the buckets of ``table`` (rows of job, variant and bucket ``b``)."""
        x0, width = head["range"][0], head["bucket_width"]
        return {**head, "series": split_series(table, ("job", "variant"), "x", x0, width, _BUCKET_VALUES)}

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

    def page(
        self,
        job: str,
        metric: str,
        *,
        variant: str | None = None,
        after: tuple[str, int] | None = None,
        limit: int = 10_000,
        fields: frozenset[str] = POINT_FIELDS,
    ) -> tuple[dict[str, list], tuple[str, int] | None]:
        """Points at full resolution in (variant, iter) order; answers them and the position after them.

        ``variant`` is answered as a list, ``iter``, ``ts`` (ms) and ``value`` as numpy arrays.

        ``fields`` names the columns to answer (``variant``, ``iter``, ``ts``, ``value``); a column not
        asked for is not read (``variant`` and ``iter`` still are where the next position needs them).
        """
        if not 1 <= limit <= MAX_PAGE:
            raise BadRequest(f"'limit' must be between 1 and {MAX_PAGE}", field="limit")
        if not fields or not fields <= POINT_FIELDS:
            unknown = ", ".join(sorted(fields - POINT_FIELDS)) or "nothing"
            raise BadRequest(
                f"'fields' names {unknown}; name some of {', '.join(sorted(POINT_FIELDS))}", field="fields"
            )
        where, params = self._where([job], metric, [variant] if variant is not None else None)
        if after is not None:
            where += " AND (variant, iter) > ({av:String}, {ai:Int64})"
            params.update(av=after[0], ai=after[1])
        params["limit"] = limit
        read = {"iter"} | set(fields) | ({"variant"} if variant is None else set())
        columns = ", ".join(
            {"variant": "variant", "iter": "iter", "ts": "toUnixTimestamp64Milli(ts) AS ts", "value": "value"}[name]
            for name in ("variant", "iter", "ts", "value")
            if name in read
        )
        table = self._engine.query(
            f"SELECT {columns} FROM {self._db}.scalars FINAL "
            f"WHERE {where} ORDER BY variant, iter LIMIT {{limit:UInt32}}",
            params,
        )
        cols: dict[str, Any] = {}
        if "variant" in read:
            cols["variant"] = _repeated_text(table.column("variant"))
        else:
            cols["variant"] = [variant] * table.num_rows
        cols["iter"] = table.column("iter").to_numpy()
        if "ts" in read:
            cols["ts"] = table.column("ts").to_numpy()
        if "value" in read:
            cols["value"] = table.column("value").to_numpy()
        nxt = (cols["variant"][-1], int(cols["iter"][-1])) if table.num_rows == limit else None
        return {name: column for name, column in cols.items() if name in fields}, nxt

    def points_of(
        self, job: str, series: list[tuple[str, str]], limit: int = MAX_PAGE
    ) -> dict[tuple[str, str], dict[str, np.ndarray]] | None:
        """Every point of each ``(metric, variant)`` of ``series`` in ``job``, read by one query: per series that
        holds points, ``iter``, ``ts`` (ms) and ``value`` arrays in iteration order. None when the series hold
        more than ``limit`` points together (read them in parts, or downsampled)."""
        if not series:
            return {}
        table = self._engine.query(
            f"""SELECT metric, variant, iter, toUnixTimestamp64Milli(ts) AS ts, value FROM {self._db}.scalars FINAL
            WHERE job = {{job:String}} AND (metric, variant) IN {{series:Array(Tuple(String, String))}}
            ORDER BY metric, variant, iter LIMIT {{limit:UInt32}}""",
            {"job": job, "series": [tuple(pair) for pair in series], "limit": limit + 1},
        )
        n = table.num_rows
        if n > limit:
            return None
        names = [table.column("metric"), table.column("variant")]
        starts = run_starts(names)
        keys = zip(*(column.take(pa.array(starts)).to_pylist() for column in names), strict=True)
        columns = {name: table.column(name).to_numpy() for name in ("iter", "ts", "value")}
        bounds = np.append(starts, n)
        return {
            key: {name: column[lo:hi] for name, column in columns.items()}
            for key, lo, hi in zip(keys, bounds[:-1].tolist(), bounds[1:].tolist(), strict=True)
        }

    def latest(self, jobs: list[str]) -> list[dict[str, Any]]:
        """The last value (by iteration) of every metric and variant of each job, with min and max."""
        if not jobs:
            return []
        return self._engine.query(
            f"""SELECT job, metric, variant, tupleElement(max(last), 3) AS value, max(last_iter) AS iter,
                toUnixTimestamp64Milli(max(last_ts)) AS ts, min(min_value) AS min, max(max_value) AS max,
                sum(points) AS points
            FROM {self._db}.scalars_latest WHERE job IN {{jobs:Array(String)}}
            GROUP BY job, metric, variant ORDER BY job, metric, variant""",
            {"jobs": list(jobs)},
        ).to_pylist()

    def _where(self, jobs: list[str], metric: str, variants: list[str] | None) -> tuple[str, dict[str, Any]]:
        params: dict[str, Any] = {"metric": metric}
        if len(jobs) == 1:
            where = "job = {job:String} AND metric = {metric:String}"
            params["job"] = jobs[0]
        else:
            where = "job IN {jobs:Array(String)} AND metric = {metric:String}"
            params["jobs"] = list(jobs)
        if variants is not None:
            where += " AND variant IN {variants:Array(String)}"
            params["variants"] = list(variants)
        return where, params

    def count(self, jobs: list[str], metric: str | None = None, variants: list[str] | None = None) -> int:
        """The exact number of stored points (a re-reported point counts once)."""
        if not jobs:
            return 0
        where = "job IN {jobs:Array(String)}"
        params: dict[str, Any] = {"jobs": list(jobs)}
        if metric is not None:
            where += " AND metric = {metric:String}"
            params["metric"] = metric
        if variants is not None:
            where += " AND variant IN {variants:Array(String)}"
            params["variants"] = list(variants)
        table = self._engine.query(f"SELECT count() AS n FROM {self._db}.scalars FINAL WHERE {where}", params)
        return int(table.column("n")[0].as_py())

    def at_iter(self, jobs: list[str], iteration: int) -> list[dict[str, Any]]:
        """Every point reported at ``iteration`` by ``jobs`` (e.g. single values), by job, metric, variant."""
        if not jobs:
            return []
        return self._engine.query(
            f"""SELECT job, metric, variant, toUnixTimestamp64Milli(ts) AS ts, value
            FROM {self._db}.scalars FINAL WHERE job IN {{jobs:Array(String)}} AND iter = {{it:Int64}}
            ORDER BY job, metric, variant""",
            {"jobs": list(jobs), "it": iteration},
        ).to_pylist()

    def recent_mean(self, job: str, last: int = 100) -> list[dict[str, Any]]:
        """Per metric and variant: the mean of the finite values among its ``last`` points by iteration."""
        return self._engine.query(
            f"""SELECT metric, variant, avgIfOrNull(value, isFinite(value)) AS mean, count() AS points
            FROM (SELECT metric, variant, iter, value FROM {self._db}.scalars FINAL WHERE job = {{job:String}}
                  ORDER BY metric, variant, iter DESC LIMIT {{last:UInt32}} BY metric, variant)
            GROUP BY metric, variant ORDER BY metric, variant""",
            {"job": job, "last": last},
        ).to_pylist()


def _repeated_text(column: pa.ChunkedArray) -> list[str]:
    """A text column as a list, built from its runs: a page usually holds one or a few variants."""
    runs = pc.run_end_encode(column.combine_chunks()) if len(column) else None
    if runs is None:
        return []
    ends, values = runs.run_ends.to_pylist(), runs.values.to_pylist()
    out: list[str] = []
    start = 0
    for end, value in zip(ends, values, strict=True):
        out.extend([value] * (end - start))
        start = end
    return out
