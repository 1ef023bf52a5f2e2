"""What the insight detectors read: per-minute summaries of many jobs at once, one query per kind of data.

Every read covers whole minutes [first_minute, last_minute] (epoch milliseconds of minute starts) and answers one
row per series with the series' minutes and values as arrays, so that a cycle over a thousand jobs costs a handful
of queries. The step progress of each worker is computed here from ``scalars`` (its ``worker`` column), so the
detectors depend on no other per-worker summary.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from .engine import Engine


class InsightData:
    def __init__(self, engine: Engine, db: str) -> None:
        self._engine = engine
        self._db = db

    def running_jobs(self) -> list[dict[str, Any]]:
        """Every running job: job, project, started (ms)."""
        return self._engine.query(
            f"""SELECT job, project, status, toUnixTimestamp64Milli(started) AS started,
                toUnixTimestamp64Milli(ended) AS ended
            FROM {self._db}.jobs FINAL WHERE deleted = 0 AND status = 'running' ORDER BY job"""
        ).to_pylist()

    def jobs(self, jobs: list[str]) -> list[dict[str, Any]]:
        """``jobs`` that exist, with project, status, started and ended (ms)."""
        return self._engine.query(
            f"""SELECT job, project, status, toUnixTimestamp64Milli(started) AS started,
                toUnixTimestamp64Milli(ended) AS ended
            FROM {self._db}.jobs FINAL WHERE job IN {{jobs:Array(String)}} AND deleted = 0 ORDER BY job""",
            {"jobs": jobs},
        ).to_pylist()

    def workers(self, jobs: list[str]) -> pa.Table:
        """The workers of ``jobs``: job, worker, status, started (ms)."""
        return self._engine.query(
            f"""SELECT job, worker, status, toUnixTimestamp64Milli(started) AS started
            FROM {self._db}.workers FINAL WHERE job IN {{jobs:Array(String)}} AND deleted = 0""",
            {"jobs": jobs},
        )

    def system(self, jobs: list[str], metrics: list[str], first_minute: int, last_minute: int) -> pa.Table:
        """Per (job, worker, metric, device): the rows of the per-minute rollup as arrays: ``minutes`` and each row's
        ``sum``, ``count``, ``min`` and ``max``. Rows are not merged here (grouping by minute first cost four times
        as much): a minute may come in several rows, which the reader combines."""
        return self._engine.query(
            f"""SELECT job, worker, metric, device, groupArray(toUnixTimestamp(minute) * 1000) AS minutes,
                groupArray(sum) AS sum, groupArray(count) AS count, groupArray(min) AS min, groupArray(max) AS max
            FROM {self._db}.system_1m
            WHERE job IN {{jobs:Array(String)}} AND metric IN {{metrics:Array(String)}}
                AND minute >= toDateTime(intDiv({{first:Int64}}, 1000))
                AND minute <= toDateTime(intDiv({{last:Int64}}, 1000))
            GROUP BY job, worker, metric, device ORDER BY job, metric, worker, device""",
            {"jobs": jobs, "metrics": metrics, "first": first_minute, "last": last_minute},
        )

    def steps(self, jobs: list[str], first_minute: int, last_minute: int) -> pa.Table:
        """Per (job, worker) that reported scalars: ``minutes``, the highest iteration reported in each (``top``)
        and how many points (``points``)."""
        return self._engine.query(
            f"""SELECT job, worker, groupArray(m) AS minutes, groupArray(top) AS top, groupArray(n) AS points
            FROM (SELECT job, worker, intDiv(toUnixTimestamp64Milli(ts), 60000) * 60000 AS m,
                    max(iter) AS top, count() AS n
                FROM {self._db}.scalars
                WHERE job IN {{jobs:Array(String)}} AND {_in_minutes()}
                GROUP BY job, worker, m)
            GROUP BY job, worker ORDER BY job, worker""",
            {"jobs": jobs, "first": first_minute, "last": last_minute},
        )

    def scalar_health(self, jobs: list[str], first_minute: int, last_minute: int) -> pa.Table:
        """Per (job, metric, variant): ``minutes``, and per minute the points that are not finite (``bad``), the
        largest (``top``) and the median (``mid``) finite value (NaN where none is finite)."""
        return self._engine.query(
            f"""SELECT job, metric, variant, groupArray(m) AS minutes, groupArray(bad) AS bad,
                groupArray(top) AS top, groupArray(mid) AS mid
            FROM (SELECT job, metric, variant, intDiv(toUnixTimestamp64Milli(ts), 60000) * 60000 AS m,
                    countIf(NOT isFinite(value)) AS bad,
                    ifNull(maxIfOrNull(value, isFinite(value)), nan) AS top,
                    ifNull(quantileExactIfOrNull(0.5)(value, isFinite(value)), nan) AS mid
                FROM {self._db}.scalars
                WHERE job IN {{jobs:Array(String)}} AND {_in_minutes()}
                GROUP BY job, metric, variant, m)
            GROUP BY job, metric, variant ORDER BY job, metric, variant""",
            {"jobs": jobs, "first": first_minute, "last": last_minute},
        )

    def log_lines(self, jobs: list[str], first_minute: int, last_minute: int) -> pa.Table:
        """Per (job, worker): ``minutes`` and how many log lines each holds (``lines``)."""
        return self._engine.query(
            f"""SELECT job, worker, groupArray(m) AS minutes, groupArray(n) AS lines
            FROM (SELECT job, worker, intDiv(toUnixTimestamp64Milli(ts), 60000) * 60000 AS m, count() AS n
                FROM {self._db}.logs WHERE job IN {{jobs:Array(String)}} AND {_in_minutes()}
                GROUP BY job, worker, m)
            GROUP BY job, worker ORDER BY job, worker""",
            {"jobs": jobs, "first": first_minute, "last": last_minute},
        )

    def first_progress(self, jobs: list[str]) -> dict[str, int]:
        """Per job of ``jobs``: the time of its first scalar point or log line (ms), where it has any."""
        rows = self._engine.query(
            f"""SELECT job, min(t) AS t FROM (
                SELECT job, toUnixTimestamp64Milli(min(first_ts)) AS t FROM {self._db}.scalars_latest
                WHERE job IN {{jobs:Array(String)}} GROUP BY job
                UNION ALL
                SELECT job, toUnixTimestamp64Milli(min(ts)) AS t FROM {self._db}.logs
                WHERE job IN {{jobs:Array(String)}} GROUP BY job)
            GROUP BY job""",
            {"jobs": jobs},
        ).to_pylist()
        return {row["job"]: int(row["t"]) for row in rows}

    def gpu_minutes(
        self, jobs: list[str] | None, project: str | None, start_ms: int, end_ms: int, idle_pct: float, low_pct: float
    ) -> list[dict[str, Any]]:
        """Per job (of ``jobs``, or of ``project``): device-minutes of ``gpu_util`` in [start, end], how many of them
        averaged under ``idle_pct`` (idle) and in [idle_pct, low_pct) (underused), and the unused share summed
        (sum of (100 - util) / 100 over the device-minutes)."""
        if jobs is not None:
            scope, params = "job IN {jobs:Array(String)}", {"jobs": jobs}
        else:
            scope = f"job IN (SELECT job FROM {self._db}.jobs FINAL WHERE project = {{project:String}} AND deleted = 0)"
            params = {"project": project}
        return self._engine.query(
            f"""SELECT job, count() AS minutes, countIf(u < {{idle:Float64}}) AS idle,
                countIf(u >= {{idle:Float64}} AND u < {{low:Float64}}) AS underused,
                sum(greatest(0, least(100, 100 - u))) / 100 AS unused
            FROM (SELECT job, worker, device, minute, sum(sum) / sum(count) AS u FROM {self._db}.system_1m
                WHERE {scope} AND metric = 'gpu_util'
                    AND minute >= toDateTime(intDiv({{start:Int64}}, 1000))
                    AND minute <= toDateTime(intDiv({{end:Int64}}, 1000))
                GROUP BY job, worker, device, minute)
            WHERE isFinite(u) GROUP BY job ORDER BY job""",
            {**params, "start": start_ms, "end": end_ms, "idle": float(idle_pct), "low": float(low_pct)},
        ).to_pylist()


def _in_minutes() -> str:
    return "ts >= fromUnixTimestamp64Milli({first:Int64}) AND ts < fromUnixTimestamp64Milli({last:Int64} + 60000)"
