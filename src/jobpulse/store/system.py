"""System metrics of workers and devices: catalogue and series over [start, end] at a step.

A series whose step and start fall on whole hours is read from the hourly rollup, one on whole
minutes from the per-minute rollup, so its cost does not depend on the sampling rate or on whether
raw samples are still kept. A rollup keeps whole periods: the last bucket of such a series holds
the samples up to the end of the period (minute or hour) in which ``end`` falls.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import BadRequest
from .changes import Changes
from .engine import Engine
from .memory import Memory
from .series import split_series
from .system_recent import RecentSystem

MAX_POINTS = 100_000
MINUTE_MS = 60_000
HOUR_MS = 3_600_000
_ROLLUPS = ((HOUR_MS, "system_1h", "hour"), (MINUTE_MS, "system_1m", "minute"))
_PERIOD_MS = {column: period for period, _, column in _ROLLUPS}


def align_start(start_ms: int, step_ms: int) -> int:
    """``start_ms`` rounded down to the longest rollup period that divides ``step_ms`` (an hour, a
    minute), so that the series can be read from that rollup; unchanged for other steps."""
    for unit, _, _ in _ROLLUPS:
        if step_ms % unit == 0:
            return start_ms - start_ms % unit
    return start_ms


def rollup_for(start_ms: int, step_ms: int) -> tuple[str, str] | None:
    """The rollup a series starting at ``start_ms`` in steps of ``step_ms`` can be read from, as
    (table, period column), or None when only raw samples fit."""
    for unit, table, column in _ROLLUPS:
        if step_ms % unit == 0 and start_ms % unit == 0:
            return table, column
    return None


@dataclass(frozen=True)
class SeriesWindow:
    """What a series read covers: [start_ms, end_ms] in buckets of ``step_ms``, of the workers and devices
    named (all of them where None). Equal windows are the same read, so a window is a key of remembered
    answers."""

    start_ms: int
    end_ms: int
    step_ms: int
    workers: tuple[str, ...] | None = None
    devices: tuple[str, ...] | None = None


@dataclass
class Grid:
    """Dense series on one time axis: ``values[i, b]`` is the mean of series ``keys[i]`` over bucket ``b``,
    which starts at ``times[b]``; NaN where the bucket has no sample or a mean that is not finite (raw
    samples that are not finite are skipped; a per-minute rollup holding one is not finite)."""

    times: np.ndarray
    keys: list[tuple[str, str, str]]
    values: np.ndarray


class System:
    def __init__(
        self, engine: Engine, db: str, changes: Changes, *, remembered: int = 128, recent: RecentSystem | None = None
    ) -> None:
        """``recent``: the per-minute rollup of the jobs this process wrote, in memory (None: every series is read
        from the tables)."""
        self._engine = engine
        self._db = db
        self._changes = changes
        self._memory = Memory(remembered)
        self._recent = recent

    def catalog(self, job: str) -> list[dict[str, Any]]:
        """Every (worker, metric) of ``job`` with its devices and time extent."""
        return self._engine.query(
            f"""SELECT worker, metric, arraySort(groupUniqArray(device)) AS devices,
                toUnixTimestamp(min(minute)) * 1000 AS first_ts, toUnixTimestamp(max(minute)) * 1000 + 59999 AS last_ts
            FROM {self._db}.system_1m WHERE job = {{job:String}}
            GROUP BY worker, metric ORDER BY length(worker), worker, metric""",
            {"job": job},
        ).to_pylist()

    def extent(self, job: str, workers: list[str] | None = None) -> tuple[int, int] | None:
        where, params = "job = {job:String}", {"job": job}
        if workers:
            where += " AND worker IN {workers:Array(String)}"
            params["workers"] = workers
        row = self._engine.query(
            f"SELECT toUnixTimestamp64Milli(min(ts)) AS lo, toUnixTimestamp64Milli(max(ts)) AS hi, count() AS n "
            f"FROM {self._db}.system WHERE {where}",
            params,
        ).to_pylist()[0]
        if row["n"]:
            return int(row["lo"]), int(row["hi"])
        rollup = self._engine.query(
            f"SELECT toUnixTimestamp(min(minute)) * 1000 AS lo, toUnixTimestamp(max(minute)) * 1000 + 59999 AS hi, "
            f"count() AS n FROM {self._db}.system_1m WHERE {where}",
            params,
        ).to_pylist()[0]
        return (int(rollup["lo"]), int(rollup["hi"])) if rollup["n"] else None

    def series(self, job: str, metrics: list[str], window: SeriesWindow) -> list[dict[str, Any]]:
        """One series per (worker, metric, device): bucket index b covers [start + b*step, start + (b+1)*step).

        Buckets without samples are absent; each present bucket has avg, min, max, last and count. Series
        read from a rollup are remembered while the store sees every write and the job's data is unchanged
        (raw samples are not: a retention period deletes them without a write); those of a job whose samples
        this process wrote from its first are computed from the in-memory rollup, without a query.
        """
        version, found = self._remembered(job, metrics, window)  # the version taken before the read
        if found is not None:
            return found
        where, params = _window(job, metrics, window.start_ms, window.end_ms, window.step_ms, window.workers)
        if window.devices is not None:
            where += " AND device IN {devices:Array(String)}"
            params["devices"] = list(window.devices)
        rollup = rollup_for(window.start_ms, window.step_ms)
        kept = None
        if rollup is not None and self._recent is not None:
            kept = self._recent.series(job, metrics, window)
        if kept is None:
            kept = self._read_series(where, params, rollup)
        if version is not None:
            self._memory.put((job, tuple(metrics), window), version, kept)
        return [dict(one) for one in kept]

    def remembered_series(self, job: str, metrics: list[str], window: SeriesWindow) -> list[dict[str, Any]] | None:
        """What ``series`` would answer, if it is remembered (no query, no wait on the engine); else None."""
        return self._remembered(job, metrics, window)[1]

    def _remembered(
        self, job: str, metrics: list[str], window: SeriesWindow
    ) -> tuple[Any, list[dict[str, Any]] | None]:
        """The version a read of the series would be remembered under (None where it would not be: raw samples,
        or a store that does not see every write), and the series remembered under it, if any."""
        version = self._changes.version([job]) if rollup_for(window.start_ms, window.step_ms) is not None else None
        kept = None if version is None else self._memory.get((job, tuple(metrics), window), version)
        return version, None if kept is None else [dict(one) for one in kept]

    def _read_series(self, where: str, params: dict[str, Any], rollup: tuple[str, str] | None) -> list[dict[str, Any]]:
        """The series selected by ``where`` and ``params``, read from ``rollup`` or from the raw samples."""
        if rollup is not None and params["step"] == _PERIOD_MS[rollup[1]]:
            # a bucket a period: the rollup's rows merged by FINAL, no grouping; reading in the key's order
            # only slowed the sort (64 series of an hour: 18-20 ms, 6-9 ms without; grouped: 12-14 ms)
            table, period = rollup
            sql = f"""SELECT worker, metric, device,
                    intDiv(toUnixTimestamp({period}) * 1000 - {{start:Int64}}, {{step:Int64}}) AS b,
                    sum / count AS avg, min, max, tupleElement(last, 2) AS last, count
                FROM {self._db}.{table} FINAL
                WHERE {where} AND {_periods_in_window(period)}
                ORDER BY worker, metric, device, b
                SETTINGS optimize_read_in_order = 0"""
        elif rollup is not None:
            table, period = rollup
            sql = f"""SELECT worker, metric, device,
                    intDiv(toUnixTimestamp({period}) * 1000 - {{start:Int64}}, {{step:Int64}}) AS b,
                    sum(sum) / sum(count) AS avg, min(min) AS min, max(max) AS max,
                    tupleElement(max(last), 2) AS last, sum(count) AS count
                FROM {self._db}.{table}
                WHERE {where} AND {_periods_in_window(period)}
                GROUP BY worker, metric, device, b ORDER BY worker, metric, device, b"""
        else:
            sql = f"""SELECT worker, metric, device,
                    intDiv(toUnixTimestamp64Milli(ts) - {{start:Int64}}, {{step:Int64}}) AS b,
                    avg(value) AS avg, min(value) AS min, max(value) AS max, argMax(value, ts) AS last,
                    count() AS count
                FROM (SELECT * FROM {self._db}.system WHERE {where}
                      AND ts BETWEEN fromUnixTimestamp64Milli({{start:Int64}})
                          AND fromUnixTimestamp64Milli({{end:Int64}})
                      LIMIT 1 BY worker, metric, device, ts)
                GROUP BY worker, metric, device, b ORDER BY worker, metric, device, b"""
        return split_series(
            self._engine.query(sql, params),
            ("worker", "metric", "device"),
            "t",
            params["start"],
            params["step"],
            ("avg", "min", "max", "last", "count"),
        )

    def grid(
        self,
        job: str,
        metrics: list[str],
        *,
        start_ms: int,
        end_ms: int,
        step_ms: int,
        workers: list[str] | None = None,
        pool_devices: bool = False,
    ) -> Grid:
        """Like ``series`` but dense and mean-only, built without a loop per bucket: one row per
        (worker, metric, device) with NaN for empty buckets. With ``pool_devices`` the devices of a
        (worker, metric) are pooled into one series (device ``""``): the mean of all their samples.
        """
        where, params = _window(job, metrics, start_ms, end_ms, step_ms, workers)
        params["n"] = buckets = (end_ms - start_ms) // step_ms + 1
        by = "worker, metric" if pool_devices else "worker, metric, device"
        rollup = rollup_for(start_ms, step_ms)
        if rollup is not None:
            source, period = rollup
            inner = f"""SELECT {by}, sum(sum) / sum(count) AS v,
                    intDiv(toUnixTimestamp({period}) * 1000 - {{start:Int64}}, {{step:Int64}}) AS b
                FROM {self._db}.{source}
                WHERE {where} AND {_periods_in_window(period)}
                GROUP BY {by}, b"""
        else:
            inner = f"""SELECT {by}, avg(value) AS v,
                    intDiv(toUnixTimestamp64Milli(ts) - {{start:Int64}}, {{step:Int64}}) AS b
                FROM (SELECT worker, metric, device, ts, value FROM {self._db}.system WHERE {where}
                      AND ts >= fromUnixTimestamp64Milli({{start:Int64}})
                      AND ts <= fromUnixTimestamp64Milli({{end:Int64}}) AND isFinite(value)
                      LIMIT 1 BY worker, metric, device, ts)
                GROUP BY {by}, b"""
        device = "''" if pool_devices else "device"
        table = self._engine.query(
            f"""SELECT worker, metric, {device} AS device, groupArray(b) AS bs, groupArray(v) AS vs
            FROM ({inner}) WHERE b >= 0 AND b < {{n:Int64}}
            GROUP BY {by} ORDER BY length(worker), worker, metric, device""",
            params,
        )
        keys = list(
            zip(
                table.column("worker").to_pylist(),
                table.column("metric").to_pylist(),
                table.column("device").to_pylist(),
                strict=True,
            )
        )
        values = np.full((len(keys), buckets), np.nan)
        if keys:
            bs, vs = table.column("bs").combine_chunks(), table.column("vs").combine_chunks()
            rows = np.repeat(np.arange(len(keys)), np.diff(bs.offsets.to_numpy()))
            cols = bs.flatten().to_numpy().astype(np.int64)
            values[rows, cols] = vs.flatten().to_numpy(zero_copy_only=False)
            values[~np.isfinite(values)] = np.nan
        times = start_ms + np.arange(buckets, dtype=np.int64) * step_ms
        return Grid(times=times, keys=keys, values=values)

    def present(self, job: str, metrics: list[str], workers: list[str] | None = None) -> set[str]:
        """Which of ``metrics`` have ever been sampled for ``job`` (by ``workers``, when given)."""
        where = "job = {job:String} AND metric IN {metrics:Array(String)}"
        params: dict[str, Any] = {"job": job, "metrics": metrics}
        if workers:
            where += " AND worker IN {workers:Array(String)}"
            params["workers"] = workers
        rows = self._engine.query(f"SELECT DISTINCT metric FROM {self._db}.system_1m WHERE {where}", params)
        return set(rows.column("metric").to_pylist())


def _periods_in_window(period: str) -> str:
    """The condition keeping the rollup periods that hold samples of [start, end]."""
    return (
        f"{period} >= toDateTime(intDiv({{start:Int64}}, 1000)) AND {period} <= toDateTime(intDiv({{end:Int64}}, 1000))"
    )


def _window(
    job: str, metrics: list[str], start_ms: int, end_ms: int, step_ms: int, workers: Sequence[str] | None
) -> tuple[str, dict[str, Any]]:
    """Check a series window and answer the condition and parameters that select it."""
    if step_ms <= 0:
        raise BadRequest("'step' must be positive", field="step")
    if end_ms < start_ms:
        raise BadRequest("'start' must not be after 'end'", field="start")
    if (end_ms - start_ms) // step_ms + 1 > MAX_POINTS:
        raise BadRequest(f"[start, end] at this step is more than {MAX_POINTS} points; use a larger step", field="step")
    params: dict[str, Any] = {"job": job, "metrics": metrics, "start": start_ms, "end": end_ms, "step": step_ms}
    where = "job = {job:String} AND metric IN {metrics:Array(String)}"
    if workers:
        where += " AND worker IN {workers:Array(String)}"
        params["workers"] = list(workers)
    return where, params
