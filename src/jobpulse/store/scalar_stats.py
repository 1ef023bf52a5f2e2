"""What a series' summary row does not hold: its value reported last, its first value, its mean, the iterations
of its minimum and maximum, and the metrics and variants of a set of jobs.

Everything here is read from the chart rollup's blocks and a few points, so its cost follows the number of
series, not their length:

- the value reported last is the last point of the series' time axis (the point of the latest timestamp; of
  points at one time, the one inserted last), read from the coarsest time blocks;
- the mean is the sum over the number of the finite values, from the coarsest iteration blocks;
- the first value is the point at the series' first iteration;
- the iteration of the minimum (maximum) is the lowest one whose value is the minimum (maximum): the finest
  iteration block that holds it is found among the blocks, then its points are read.

Each worker (rank) of a job reports series of its own; what is answered per (job, metric, variant) is its leader's
series (``ranks.py``).

Minimum and maximum are those of every value reported, replaced or not (as the summary rows keep them); a
replaced minimum is found at its iteration while its old point is still stored, else at the block's lowest
value.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from .engine import Engine
from .rollup_sql import ROLLUP_LEVELS

Series = tuple[str, str, str]
_FINE = ROLLUP_LEVELS[0][0]
_CHUNK = 100  # series whose points are read by one query


class ScalarStats:
    def __init__(
        self, engine: Engine, db: str, leaders: Callable[[list[str]], dict[Series, str]] | None = None
    ) -> None:
        """``leaders``: the leader's worker of every series of some jobs (``Scalars.leaders``); without it, of a
        series of several workers, any one's is answered."""
        self._engine = engine
        self._db = db
        self._leaders = leaders

    def of(self, jobs: list[str]) -> dict[Series, dict[str, Any]]:
        """Per (job, metric, variant) of ``jobs``: ``recent`` (value reported last) with its time ``recent_ts``,
        ``mean``, ``first_value`` with ``first_iter``, ``min_iter`` and ``max_iter`` (None where unknown)."""
        if not jobs:
            return {}
        leaders = self._leaders(jobs) if self._leaders is not None else {}
        out = self._coarse(jobs, leaders)
        blocks = self._extreme_blocks(jobs, leaders)
        ranges: list[tuple[Series, int, int]] = []
        for series, entry in out.items():
            if entry["first_iter"] is not None:
                ranges.append((series, entry["first_iter"], entry["first_iter"]))
            for block in blocks.get(series, {}).values():
                ranges.append((series, block << _FINE, ((block + 1) << _FINE) - 1))
        points = self._points(ranges, leaders)
        for series, entry in out.items():
            found = points.get(series, [])
            first = [p for p in found if p["iter"] == entry["first_iter"]]
            entry["first_value"] = _finite(max(first, key=lambda p: p["inserted"])["value"]) if first else None
            for name, block in blocks.get(series, {}).items():
                lo, hi = block << _FINE, ((block + 1) << _FINE) - 1
                inside = [p for p in found if lo <= p["iter"] <= hi and math.isfinite(p["value"])]
                if inside:
                    pick = min if name == "min" else max
                    extreme = pick(p["value"] for p in inside)
                    entry[f"{name}_iter"] = min(p["iter"] for p in inside if p["value"] == extreme)
        return out

    def _coarse(self, jobs: list[str], leaders: dict[Series, str]) -> dict[Series, dict[str, Any]]:
        rows = self._engine.query(
            f"""SELECT job, metric, variant, worker,
                sumIf(sum, axis = 0) / nullIf(sumIf(n, axis = 0), 0) AS mean,
                tupleElement(maxIf(last, axis = 1), 3) AS recent, tupleElement(maxIf(last, axis = 1), 1) AS recent_ts,
                minIf(first_iter, axis = 0 AND count > 0) AS first_iter
            FROM {self._db}.scalars_rollup
            WHERE job IN {{jobs:Array(String)}}
                AND ((axis = 0 AND level = {ROLLUP_LEVELS[0][-1]}) OR (axis = 1 AND level = {ROLLUP_LEVELS[1][-1]}))
            GROUP BY job, metric, variant, worker HAVING sumIf(count, axis = 0) > 0""",
            {"jobs": list(jobs)},
        ).to_pylist()
        out: dict[Series, dict[str, Any]] = {}
        for row in _of_leaders(rows, leaders):
            out[(row["job"], row["metric"], row["variant"])] = {
                "mean": _finite(row["mean"]),
                "recent": _finite(row["recent"]),
                "recent_ts": row["recent_ts"],
                "first_iter": row["first_iter"],
                "first_value": None,
                "min_iter": None,
                "max_iter": None,
            }
        return out

    def _extreme_blocks(self, jobs: list[str], leaders: dict[Series, str]) -> dict[Series, dict[str, int]]:
        """The finest iteration block holding each series' minimum and maximum (the lowest such block)."""
        rows = self._engine.query(
            f"""SELECT job, metric, variant, worker,
                argMinIf(block, (assumeNotNull(low), block), low IS NOT NULL) AS min_block,
                argMaxIf(block, (assumeNotNull(high), -block), high IS NOT NULL) AS max_block,
                countIf(low IS NOT NULL) AS finite
            FROM (SELECT job, metric, variant, worker, block, min(min) AS low, max(max) AS high
                  FROM {self._db}.scalars_rollup
                  WHERE job IN {{jobs:Array(String)}} AND axis = 0 AND level = {_FINE}
                  GROUP BY job, metric, variant, worker, block)
            GROUP BY job, metric, variant, worker""",
            {"jobs": list(jobs)},
        ).to_pylist()
        return {
            (row["job"], row["metric"], row["variant"]): {"min": row["min_block"], "max": row["max_block"]}
            for row in _of_leaders(rows, leaders)
            if row["finite"]
        }

    def _points(
        self, ranges: list[tuple[Series, int, int]], leaders: dict[Series, str]
    ) -> dict[Series, list[dict[str, Any]]]:
        """Every stored version of the points in ``ranges`` (series, lowest, highest iteration) of the series'
        leaders."""
        out: dict[Series, list[dict[str, Any]]] = {}
        for start in range(0, len(ranges), _CHUNK):
            chunk = ranges[start : start + _CHUNK]
            params: dict[str, Any] = {"jobs": sorted({series[0] for series, _, _ in chunk})}
            terms = []
            for i, ((job, metric, variant), lo, hi) in enumerate(chunk):
                by = ""
                if (job, metric, variant) in leaders:
                    by = f" AND worker = {{w{i}:String}}"
                    params[f"w{i}"] = leaders[(job, metric, variant)]
                terms.append(
                    f"(job = {{j{i}:String}} AND metric = {{m{i}:String}} AND variant = {{v{i}:String}}{by} "
                    f"AND iter BETWEEN {{lo{i}:Int64}} AND {{hi{i}:Int64}})"
                )
                params.update({f"j{i}": job, f"m{i}": metric, f"v{i}": variant, f"lo{i}": lo, f"hi{i}": hi})
            rows = self._engine.query(
                f"""SELECT job, metric, variant, iter, value, toUnixTimestamp64Micro(inserted) AS inserted
                FROM {self._db}.scalars WHERE job IN {{jobs:Array(String)}} AND ({" OR ".join(terms)})""",
                params,
            ).to_pylist()
            for row in rows:
                out.setdefault((row["job"], row["metric"], row["variant"]), []).append(row)
        return out

    def variants(
        self, *, jobs: list[str] | None = None, projects: list[str] | None = None, tag: str = "", with_tag: bool = False
    ) -> list[tuple[str, str]]:
        """The (metric, variant) pairs reported by ``jobs``, or by the jobs of ``projects`` (all projects when
        None) that carry ``tag`` (``with_tag``) or do not carry it; sorted."""
        params: dict[str, Any] = {"tag": tag, "with_tag": int(with_tag)}
        scope = "deleted = 0 AND has(tags, {tag:String}) = {with_tag:UInt8}"
        if jobs is not None:
            scope += " AND job IN {jobs:Array(String)}"
            params["jobs"] = list(jobs)
        if projects is not None:
            scope += " AND project IN {projects:Array(String)}"
            params["projects"] = list(projects)
        rows = self._engine.query(
            f"""SELECT DISTINCT metric, variant FROM {self._db}.scalars_latest
            WHERE job IN (SELECT job FROM {self._db}.jobs FINAL WHERE {scope})
            ORDER BY metric, variant""",
            params,
        ).to_pylist()
        return [(row["metric"], row["variant"]) for row in rows]


def _of_leaders(rows: list[dict[str, Any]], leaders: dict[Series, str]) -> list[dict[str, Any]]:
    """The rows (one per job, metric, variant and worker) of each series' leader, where it is known."""
    return [
        row for row in rows if leaders.get((row["job"], row["metric"], row["variant"]), row["worker"]) == row["worker"]
    ]


def _finite(value: float | None) -> float | None:
    return value if value is not None and math.isfinite(value) else None
