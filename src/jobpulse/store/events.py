"""Vectors, plots and debug images of a job: catalogue and reads by metric, variant and iteration."""

from __future__ import annotations

from typing import Any

from ..errors import BadRequest
from .engine import Engine

KINDS = ("vector", "plot", "image")


class Events:
    def __init__(self, engine: Engine, db: str) -> None:
        self._engine = engine
        self._db = db

    def metrics(self, job: str, kind: str) -> list[dict[str, Any]]:
        _check_kind(kind)
        return self._engine.query(
            f"""SELECT metric, variant, count() AS events, min(iter) AS first_iter, max(iter) AS last_iter
            FROM (SELECT metric, variant, iter FROM {self._db}.events
                  WHERE job = {{job:String}} AND kind = {{kind:String}} LIMIT 1 BY metric, variant, iter, key)
            GROUP BY metric, variant ORDER BY metric, variant""",
            {"job": job, "kind": kind},
        ).to_pylist()

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
    ) -> list[dict[str, Any]]:
        """Events in (metric, variant, iter, key) order; ``last_iters`` keeps the latest N iterations
        of each (metric, variant)."""
        _check_kind(kind)
        clauses = ["job = {job:String}", "kind = {kind:String}"]
        params: dict[str, Any] = {"job": job, "kind": kind, "limit": limit}
        for name, value in (("metric", metric), ("variant", variant)):
            if value is not None:
                clauses.append(f"{name} = {{{name}:String}}")
                params[name] = value
        if iter_min is not None:
            clauses.append("iter >= {imin:Int64}")
            params["imin"] = iter_min
        if iter_max is not None:
            clauses.append("iter <= {imax:Int64}")
            params["imax"] = iter_max
        if after is not None:
            clauses.append("(metric, variant, iter, key) > ({am:String}, {av:String}, {ai:Int64}, {ak:String})")
            params.update(am=after[0], av=after[1], ai=after[2], ak=after[3])
        inner = (f"SELECT * FROM {self._db}.events FINAL WHERE {' AND '.join(clauses)}")
        if last_iters is not None:
            inner = (f"SELECT * FROM ({inner}) WHERE (metric, variant, iter) IN ("
                     f"SELECT metric, variant, iter FROM (SELECT DISTINCT metric, variant, iter FROM ({inner})) "
                     f"ORDER BY iter DESC LIMIT {int(last_iters)} BY metric, variant)")
        return self._engine.query(
            f"""SELECT metric, variant, iter, key, toUnixTimestamp64Milli(ts) AS ts, worker, url, payload,
                model_event FROM ({inner}) ORDER BY metric, variant, iter, key LIMIT {{limit:UInt32}}""",
            params,
        ).to_pylist()


def _check_kind(kind: str) -> None:
    if kind not in KINDS:
        raise BadRequest(f"'kind' must be one of {', '.join(KINDS)}", field="kind")
