"""Vectors, plots and debug images of a job: catalogue and reads by metric, variant and iteration.

An event replaces the one of the same (job, kind, metric, variant, iteration, key) stored before. A debug image
also replaces every image of its series reported at a lower iteration under the same URL: clients keep a
bounded history of files per series and write the oldest file over (ClearML's SDK names them
``<metric>_<variant>_<n % history>``), so the older event would show the newer picture. Every read sees the
images as replaced; an image without a URL is kept as reported.
"""

from __future__ import annotations

from typing import Any

from ..errors import BadRequest
from .engine import Engine

KINDS = ("vector", "plot", "image")


class Events:
    def __init__(self, engine: Engine, db: str) -> None:
        self._engine = engine
        self._db = db

    def metrics(self, job: str, kind: str, *, with_url: bool = False) -> list[dict[str, Any]]:
        """Each series of ``kind`` with its event count and first and last iteration; ``with_url``: of the
        events that have a URL only."""
        _check_kind(kind)
        clauses = ["job = {job:String}", "kind = {kind:String}"] + (["url != ''"] if with_url else [])
        return self._engine.query(
            f"""SELECT metric, variant, count() AS events, min(iter) AS first_iter, max(iter) AS last_iter
            FROM ({self._current(kind, clauses, "metric, variant, iter")})
            GROUP BY metric, variant ORDER BY metric, variant""",
            {"job": job, "kind": kind},
        ).to_pylist()

    def _current(self, kind: str, clauses: list[str], columns: str = "*") -> str:
        """The stored events of ``clauses`` as they read now (see the module): a query of ``columns``."""
        where = " AND ".join(clauses)
        if kind != "image":
            return f"SELECT {columns} FROM {self._db}.events FINAL WHERE {where}"
        return (
            f"SELECT {columns} FROM {self._db}.events FINAL WHERE {where} "
            "ORDER BY iter DESC, inserted DESC "
            "LIMIT 1 BY metric, variant, if(url = '', concat(toString(iter), '/', key), url)"
        )

    def urls(self, job: str) -> list[str]:
        """The addresses of the files a job's events name: its debug images' URLs and the image sources its plots
        show, each once."""
        found = self._engine.query(
            f"""SELECT DISTINCT arrayJoin(if(kind = 'image', [url], extractAll(payload, {{source:String}}))) AS url
            FROM {self._db}.events FINAL
            WHERE job = {{job:String}} AND ((kind = 'image' AND url != '') OR kind = 'plot')
            ORDER BY url""",
            {"job": job, "source": _PLOT_SOURCE},
        )
        return [url for url in found.column("url").to_pylist() if url]

    def read(
        self,
        job: str,
        kind: str,
        *,
        metric: str | None = None,
        variant: str | None = None,
        iter_min: int | None = None,
        iter_max: int | None = None,
        last_iters: int | None = None,
        limit: int = 500,
        after: tuple[str, str, int, str] | None = None,
        with_url: bool = False,
    ) -> list[dict[str, Any]]:
        """Events in (metric, variant, iter, key) order; ``last_iters`` keeps the latest N iterations
        of each (metric, variant); ``with_url``: only events that have a URL."""
        _check_kind(kind)
        series = ["job = {job:String}", "kind = {kind:String}"] + (["url != ''"] if with_url else [])
        params: dict[str, Any] = {"job": job, "kind": kind, "limit": limit}
        for name, value in (("metric", metric), ("variant", variant)):
            if value is not None:
                series.append(f"{name} = {{{name}:String}}")
                params[name] = value
        clauses = ["1"]
        if iter_min is not None:
            clauses.append("iter >= {imin:Int64}")
            params["imin"] = iter_min
        if iter_max is not None:
            clauses.append("iter <= {imax:Int64}")
            params["imax"] = iter_max
        if after is not None:
            clauses.append("(metric, variant, iter, key) > ({am:String}, {av:String}, {ai:Int64}, {ak:String})")
            params.update(am=after[0], av=after[1], ai=after[2], ak=after[3])
        inner = f"SELECT * FROM ({self._current(kind, series)}) WHERE {' AND '.join(clauses)}"
        if last_iters is not None:
            inner = (
                f"SELECT * FROM ({inner}) WHERE (metric, variant, iter) IN ("
                f"SELECT metric, variant, iter FROM (SELECT DISTINCT metric, variant, iter FROM ({inner})) "
                f"ORDER BY iter DESC LIMIT {int(last_iters)} BY metric, variant)"
            )
        return self._engine.query(
            f"""SELECT metric, variant, iter, key, toUnixTimestamp64Milli(ts) AS ts, worker, url, payload,
                model_event FROM ({inner}) ORDER BY metric, variant, iter, key LIMIT {{limit:UInt32}}""",
            params,
        ).to_pylist()

    def timeline(
        self,
        job: str,
        sources: tuple[str, ...],
        *,
        metric: str | None = None,
        after: tuple[int, int, str, str, int, str] | None = None,
        descending: bool = False,
        limit: int = 500,
    ) -> list[dict[str, Any]]:
        """What a job reported, of the ``sources`` among scalar, vector, plot, image and log, by time.

        Rows are ordered by ``(ts, src, a, b, n, c)``, a total order (src: 0 scalar, 1 vector, plot or
        image, 2 log; a, b, n, c: metric, variant, iter, kind/key, or worker, '', seq - 2^63, '');
        ``after`` is that tuple of the last row of the previous page.
        """
        parts, params = self._timeline_parts(job, sources, metric)
        if not parts:
            return []
        where = ""
        if after is not None:
            op = "<" if descending else ">"
            where = (
                f"WHERE (ts, src, a, b, n, c) {op} ({{at:Int64}}, {{asrc:UInt8}}, {{aa:String}}, "
                "{ab:String}, {an:Int64}, {ac:String})"
            )
            params.update(at=after[0], asrc=after[1], aa=after[2], ab=after[3], an=after[4], ac=after[5])
        order = "DESC" if descending else "ASC"
        params["limit"] = limit
        return self._engine.query(
            f"""SELECT * FROM ({" UNION ALL ".join(parts)}) {where}
            ORDER BY ts {order}, src {order}, a {order}, b {order}, n {order}, c {order}
            LIMIT {{limit:UInt32}}""",
            params,
        ).to_pylist()

    def timeline_count(self, job: str, sources: tuple[str, ...], *, metric: str | None = None) -> int:
        parts, params = self._timeline_parts(job, sources, metric)
        if not parts:
            return 0
        table = self._engine.query(f"SELECT count() AS n FROM ({' UNION ALL '.join(parts)})", params)
        return int(table.column("n")[0].as_py())

    def _timeline_parts(self, job: str, sources: tuple[str, ...], metric: str | None) -> tuple[list[str], dict]:
        params: dict[str, Any] = {"job": job}
        by_metric = ""
        if metric is not None:
            by_metric = " AND metric = {metric:String}"
            params["metric"] = metric
        parts = []
        if "scalar" in sources:
            parts.append(
                f"""SELECT toUnixTimestamp64Milli(ts) AS ts, toUInt8(0) AS src, metric AS a, variant AS b,
                    toInt64(iter) AS n, '' AS c, 'scalar' AS kind, toString(worker) AS worker, value,
                    '' AS key, '' AS url, '' AS payload, '' AS level, '' AS msg, model_event
                FROM {self._db}.scalars FINAL WHERE job = {{job:String}}{by_metric}"""
            )
        kinds = [k for k in KINDS if k in sources]
        for kind in kinds:
            parts.append(
                f"""SELECT toUnixTimestamp64Milli(ts) AS ts, toUInt8(1) AS src, metric AS a, variant AS b,
                    toInt64(iter) AS n, concat(toString(kind), '/', key) AS c, toString(kind) AS kind,
                    toString(worker) AS worker, nan AS value, key, url, payload, '' AS level, '' AS msg,
                    model_event
                FROM ({self._current(kind, [f"job = {{job:String}} AND kind = '{kind}'{by_metric}"])})"""
            )
        if "log" in sources and metric is None:
            parts.append(
                f"""SELECT toUnixTimestamp64Milli(ts) AS ts, toUInt8(2) AS src, toString(worker) AS a,
                    '' AS b, reinterpretAsInt64(bitXor(seq, toUInt64(9223372036854775808))) AS n, '' AS c,
                    'log' AS kind, toString(worker) AS worker, nan AS value, '' AS key, '' AS url,
                    '' AS payload, toString(level) AS level, msg, toUInt8(0) AS model_event
                FROM (SELECT * FROM {self._db}.logs WHERE job = {{job:String}} LIMIT 1 BY ts, worker, seq)"""
            )
        return parts, params


# an image a plot shows: its "source" URL (ClearML's SDK puts matplotlib images in Plotly layouts so)
_PLOT_SOURCE = r"""['"]source['"]:\s?['"]([a-zA-Z][a-zA-Z0-9+.-]*://[^'"]*)['"]"""


def _check_kind(kind: str) -> None:
    if kind not in KINDS:
        raise BadRequest(f"'kind' must be one of {', '.join(KINDS)}", field="kind")
