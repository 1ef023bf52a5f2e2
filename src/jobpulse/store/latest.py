"""Each series' summary row for a batch of points (``scalars_latest``), computed with numpy beside the insert.

A series is (job, metric, variant, worker): each worker (rank) of a job reports series of its own. The row of a
series holds its last point as ``(iter, inserted, value)``, its first and last iteration and time,
the minimum and maximum of its finite values, and its number of points; the table keeps the maximum, minimum or
sum of each column over all batches, so its merged row summarises every point the series was sent. The same
row is defined in SQL by ``rollup_sql.LATEST_SELECT`` (which builds it in upgrades); ``tests/test_latest.py`` holds
the two to the same rows.

Kept by a materialized view, the summary cost 15-20 ms per 100,000 points (grouping them all in the
engine); here it is a few reductions over arrays sorted by series.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from .rollup import LAST_POINT, SERIES_COLUMNS, by_series_then_x


def latest_rows(
    points: pa.Table,
    codes: np.ndarray,
    series: list[tuple[str, str, str, str]],
    inserted_us: int,
    replacing: np.ndarray | None = None,
) -> pa.Table:
    """The summary row of each series of ``points`` (columns ``iter``, ``ts``, ``value``; at most one point per
    series and iteration), whose row ``i`` belongs to ``series[codes[i]]`` (job, metric, variant, worker). ``replacing``
    holds the codes of the points that replace stored ones: a series' count leaves them out, so a re-reported
    iteration (a run resumed from a checkpoint) counts once."""
    iters = points.column("iter").to_numpy()
    ts_ms = points.column("ts").cast(pa.int64()).to_numpy()
    values = points.column("value").to_numpy()
    order = by_series_then_x(codes, iters)
    if order is not None:
        codes, iters, ts_ms, values = codes[order], iters[order], ts_ms[order], values[order]
    starts = np.flatnonzero(np.concatenate(([True], codes[1:] != codes[:-1])))
    ends = np.append(starts[1:], len(codes)) - 1
    finite = np.isfinite(values)
    some_finite = np.add.reduceat(finite, starts) > 0
    count = len(starts)
    points_of = np.diff(np.append(starts, len(codes))).astype(np.uint64)
    if replacing is not None and len(replacing):
        points_of -= np.bincount(replacing, minlength=len(series)).astype(np.uint64)[codes[starts]]
    heads = codes[starts].tolist()
    names = [pa.array([series[code][i] for code in heads], pa.string()) for i in range(len(SERIES_COLUMNS))]
    last = pa.StructArray.from_arrays(
        [
            pa.array(iters[ends]),
            pa.array(np.full(count, inserted_us, dtype=np.int64)).cast(pa.timestamp("us")),
            pa.array(values[ends]),
        ],
        fields=list(LAST_POINT),
    )
    return pa.table(
        {
            **dict(zip(SERIES_COLUMNS, names, strict=True)),
            "last": last,
            "first_iter": pa.array(iters[starts]),
            "last_iter": pa.array(iters[ends]),
            "first_ts": pa.array(np.minimum.reduceat(ts_ms, starts)).cast(pa.timestamp("ms")),
            "last_ts": pa.array(np.maximum.reduceat(ts_ms, starts)).cast(pa.timestamp("ms")),
            "min_value": pa.array(np.minimum.reduceat(np.where(finite, values, np.inf), starts), mask=~some_finite),
            "max_value": pa.array(np.maximum.reduceat(np.where(finite, values, -np.inf), starts), mask=~some_finite),
            "points": pa.array(points_of),
        }
    )
