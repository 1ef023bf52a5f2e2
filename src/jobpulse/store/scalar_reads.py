"""Training scalars read point by point or per series: the catalogue of a job's series, full-resolution pages,
latest values, counts and single iterations; each answers the leader's series by default (``ranks.py``)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..errors import BadRequest
from . import ranks
from .catalogue import Catalogue
from .engine import Engine
from .ranks import Extent, JobLeaders, Series
from .series import run_starts

MAX_PAGE = 200_000
POINT_FIELDS = frozenset({"variant", "iter", "ts", "value"})
ONLY_SERIES = " AND (job, metric, variant, worker) IN {only:Array(Tuple(String, String, String, String))}"


class ScalarReads:
    def __init__(self, engine: Engine, db: str, catalogue: Catalogue, job_leaders: JobLeaders | None) -> None:
        """``job_leaders``: the ``leader`` field of each of some jobs, looked up where a series has several
        workers."""
        self._engine = engine
        self._db = db
        self._catalogue = catalogue
        self._job_leaders = job_leaders

    # -- which series: per worker, the leader's by default ------------------------------------------------------

    def _parts(self, jobs: list[str], metric: str | None, variants: list[str] | None) -> dict[Series, Extent]:
        """The extent of every series (per worker) of ``metric`` (any: None) and ``variants`` (all: None) of
        ``jobs``: from the catalogue where it remembers the jobs, else read."""
        found = self._catalogue.series(jobs, metric, variants)
        return found if found is not None else self._read_parts(jobs, metric, variants)

    def _read_parts(self, jobs: list[str], metric: str | None, variants: list[str] | None) -> dict[Series, Extent]:
        where, params = jobs_where(jobs, metric, variants)
        rows = self._engine.query(
            f"""SELECT job, metric, variant, worker, min(first_iter) AS i0, max(last_iter) AS i1,
                toUnixTimestamp64Milli(min(first_ts)) AS t0, toUnixTimestamp64Milli(max(last_ts)) AS t1
            FROM {self._db}.scalars_latest WHERE {where} GROUP BY job, metric, variant, worker""",
            params,
        ).to_pylist()
        return {(r["job"], r["metric"], r["variant"], r["worker"]): [r["i0"], r["i1"], r["t0"], r["t1"]] for r in rows}

    def _only(
        self,
        jobs: list[str],
        metric: str | None,
        variants: list[str] | None,
        params: dict[str, Any],
        worker: str | None = None,
    ) -> str | None:
        """A condition that keeps a read of the points to the leader's series (``worker``'s where named), its
        parameter added to ``params``: "" where every series is read (one worker each), None where none is."""
        parts = self._parts(jobs, metric, variants)
        chosen = ranks.chosen(parts, "leader", worker, self._job_leaders)
        if not chosen:
            return None
        if chosen == set(parts):
            return ""
        params["only"] = sorted(chosen)
        return ONLY_SERIES

    def leaders(self, jobs: list[str]) -> dict[tuple[str, str, str], str]:
        """The leader (``ranks.py``) of every (job, metric, variant) of ``jobs``."""
        return ranks.leaders(self._parts(jobs, None, None), self._job_leaders)

    # -- reads ----------------------------------------------------------------------------------------------------

    def metrics(self, job: str) -> list[dict[str, Any]]:
        """Every metric of ``job`` with its variants: per variant the points and x extent of its leader's series,
        the ``leader`` and the ``workers`` that reported it."""
        rows = self._engine.query(
            f"""SELECT metric, variant, worker, min(first_iter) AS first_iter, max(last_iter) AS last_iter,
                toUnixTimestamp64Milli(min(first_ts)) AS first_ts, toUnixTimestamp64Milli(max(last_ts)) AS last_ts,
                sum(points) AS points
            FROM {self._db}.scalars_latest WHERE job = {{job:String}}
            GROUP BY metric, variant, worker ORDER BY metric, variant, worker""",
            {"job": job},
        ).to_pylist()
        by_series: dict[tuple[str, str, str], dict[str, dict[str, Any]]] = {}
        for row in rows:
            by_series.setdefault((job, row["metric"], row["variant"]), {})[row["worker"]] = row
        picked = self._leaders(by_series)
        out: dict[str, dict[str, Any]] = {}
        for (_, metric, variant), workers in by_series.items():
            first = picked[(job, metric, variant)]
            row = workers[first]
            entry = out.setdefault(metric, {"metric": metric, "variants": []})
            fields = ("first_iter", "last_iter", "first_ts", "last_ts", "points")
            entry["variants"].append(
                {"variant": variant, **{k: row[k] for k in fields}, "leader": first, "workers": sorted(workers)}
            )
        return list(out.values())

    def _leaders(self, by_series: dict[tuple[str, str, str], dict[str, dict[str, Any]]]) -> dict[tuple, str]:
        """The leader of each (job, metric, variant) of ``by_series`` (its rows by worker, with ``first_ts``)."""
        first_ms = {key: {worker: row["first_ts"] for worker, row in rows.items()} for key, rows in by_series.items()}
        return ranks.leaders_of(first_ms, self._job_leaders)

    def latest(self, jobs: list[str], *, workers: str = "leader", worker: str | None = None) -> list[dict[str, Any]]:
        """The last value (by iteration) of every metric and variant of each job, with min and max: the leader's
        series (``workers`` ``leader``), every worker's (``all``; each row names its ``worker``), or ``worker``'s."""
        ranks.check_mode(workers, ranks.LATEST_MODES)
        if not jobs:
            return []
        return self.latest_table(jobs, workers=workers, worker=worker).to_pylist()

    def latest_table(self, jobs: list[str], *, workers: str = "leader", worker: str | None = None) -> pa.Table:
        """``latest`` of one or more ``jobs`` as columns, a row per series in the order of job, metric, variant (and
        worker)."""
        ranks.check_mode(workers, ranks.LATEST_MODES)
        where, params = "job IN {jobs:Array(String)}", {"jobs": list(jobs)}
        if worker is not None:
            where += " AND worker = {worker:String}"
            params["worker"] = worker
        # FINAL merges each series' rows as the table's merges do (maxima, minima, sums): 2-3 ms less than the same
        # reductions by GROUP BY for 5,000 series, merged or in six parts
        table = self._engine.query(
            f"""SELECT job, metric, variant, worker, tupleElement(last, 3) AS value, last_iter AS iter,
                toUnixTimestamp64Milli(last_ts) AS ts, min_value AS min, max_value AS max, points,
                toUnixTimestamp64Milli(first_ts) AS first_ts
            FROM {self._db}.scalars_latest FINAL WHERE {where} ORDER BY job, metric, variant, worker""",
            params,
        )
        if worker is not None or workers == "all":
            return table.drop_columns(["first_ts"])
        series = run_starts([table.column(name) for name in ("job", "metric", "variant")])
        if len(series) < table.num_rows:  # a series of several workers: its leader's row
            table = table.filter(self._leader_rows(table))
        return table.drop_columns(["worker", "first_ts"])

    def _leader_rows(self, table: pa.Table) -> pa.Array:
        """Which rows of ``table`` (one per job, metric, variant and worker, with ``first_ts``) are their series'
        leader's."""
        keys = list(zip(*(table.column(name).to_pylist() for name in ("job", "metric", "variant")), strict=True))
        names = table.column("worker").to_pylist()
        first_ms: dict[tuple[str, str, str], dict[str, int]] = {}
        for key, name, ms in zip(keys, names, table.column("first_ts").to_pylist(), strict=True):
            first_ms.setdefault(key, {})[name] = ms
        picked = ranks.leaders_of(first_ms, self._job_leaders)
        return pa.array([picked[key] == name for key, name in zip(keys, names, strict=True)])

    def page(
        self,
        job: str,
        metric: str,
        *,
        variant: str | None = None,
        after: tuple[str, int] | None = None,
        limit: int = 10_000,
        fields: frozenset[str] = POINT_FIELDS,
        worker: str | None = None,
    ) -> tuple[dict[str, list], tuple[str, int] | None]:
        """Points at full resolution in (variant, iter) order; answers them and the position after them.

        ``variant`` is answered as a list, ``iter``, ``ts`` (ms) and ``value`` as numpy arrays. The points are
        the leader's series of each variant, or ``worker``'s where named.

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
        variants = [variant] if variant is not None else None
        where, params = series_where([job], metric, variants)
        only = self._only([job], metric, variants, params, worker)
        only = " AND 0" if only is None else only  # no such worker: no points
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
            f"WHERE {where}{only} ORDER BY variant, iter LIMIT {{limit:UInt32}}",
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
        """Every point of each ``(metric, variant)`` of ``series`` in ``job`` (the leader's series), read by one
        query: per series that holds points, ``iter``, ``ts`` (ms) and ``value`` arrays in iteration order. None
        when the series hold more than ``limit`` points together (read them in parts, or downsampled)."""
        if not series:
            return {}
        params: dict[str, Any] = {"job": job, "series": [tuple(pair) for pair in series], "limit": limit + 1}
        only = self._only([job], None, None, params)
        if only is None:
            return {}
        table = self._engine.query(
            f"""SELECT metric, variant, iter, toUnixTimestamp64Milli(ts) AS ts, value FROM {self._db}.scalars FINAL
            WHERE job = {{job:String}} AND (metric, variant) IN {{series:Array(Tuple(String, String))}}{only}
            ORDER BY metric, variant, iter LIMIT {{limit:UInt32}}""",
            params,
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

    def count(self, jobs: list[str], metric: str | None = None, variants: list[str] | None = None) -> int:
        """The exact number of stored points of the leader's series (a re-reported point counts once)."""
        if not jobs:
            return 0
        where, params = jobs_where(jobs, metric, variants)
        only = self._only(jobs, metric, variants, params)
        if only is None:
            return 0
        table = self._engine.query(f"SELECT count() AS n FROM {self._db}.scalars FINAL WHERE {where}{only}", params)
        return int(table.column("n")[0].as_py())

    def at_iter(self, jobs: list[str], iteration: int) -> list[dict[str, Any]]:
        """Every point reported at ``iteration`` by ``jobs`` (e.g. single values), by job, metric, variant (the
        leader's series)."""
        if not jobs:
            return []
        params: dict[str, Any] = {"jobs": list(jobs), "it": iteration}
        only = self._only(jobs, None, None, params)
        if only is None:
            return []
        return self._engine.query(
            f"""SELECT job, metric, variant, toUnixTimestamp64Milli(ts) AS ts, value
            FROM {self._db}.scalars FINAL WHERE job IN {{jobs:Array(String)}} AND iter = {{it:Int64}}{only}
            ORDER BY job, metric, variant""",
            params,
        ).to_pylist()

    def recent_mean(self, job: str, last: int = 100) -> list[dict[str, Any]]:
        """Per metric and variant (the leader's series): the mean of the finite values among its ``last`` points
        by iteration."""
        params: dict[str, Any] = {"job": job, "last": last}
        only = self._only([job], None, None, params)
        if only is None:
            return []
        return self._engine.query(
            f"""SELECT metric, variant, avgIfOrNull(value, isFinite(value)) AS mean, count() AS points
            FROM (SELECT metric, variant, iter, value FROM {self._db}.scalars FINAL WHERE job = {{job:String}}{only}
                  ORDER BY metric, variant, iter DESC LIMIT {{last:UInt32}} BY metric, variant)
            GROUP BY metric, variant ORDER BY metric, variant""",
            params,
        ).to_pylist()


def jobs_where(jobs: list[str], metric: str | None, variants: list[str] | None) -> tuple[str, dict[str, Any]]:
    """The condition that keeps a read to ``jobs`` (to ``metric`` and its ``variants`` where given), and its
    parameters."""
    where, params = "job IN {jobs:Array(String)}", {"jobs": list(jobs)}
    if metric is not None:
        where += " AND metric = {metric:String}"
        params["metric"] = metric
    if variants is not None:
        where += " AND variant IN {variants:Array(String)}"
        params["variants"] = list(variants)
    return where, params


def series_where(jobs: list[str], metric: str, variants: list[str] | None) -> tuple[str, dict[str, Any]]:
    """The condition that keeps a read to ``metric`` (its ``variants``, else all) of ``jobs``, and its parameters."""
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
