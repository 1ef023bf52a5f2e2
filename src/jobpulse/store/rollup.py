"""The chart rollup's blocks for a batch of points, computed with numpy beside the insert of the points.

A block of level ``L`` on an axis (0: iterations, 1: milliseconds) holds the points whose ``x`` falls in
``[k * 2**L, (k + 1) * 2**L)``: the sum and number of finite values, the number of points, the finite
minimum and maximum, the last point as ``(x, inserted, value)``, and the first and last ``x`` and iteration.
The same blocks are defined in SQL by ``rollup_sql.rollup_select`` (which rebuilds the rollup in upgrades);
``tests/test_rollup.py`` holds the two to the same rows.

Built in the database by a materialized view, the rollup cost 50 ms per 100,000 points at 10 steps a
second and 250 ms at one step a second (every 4-second block of the time axis was a group of its own);
here the finest blocks are runs of a sorted array and each coarser level is grouped from the one below.
"""

from __future__ import annotations

import itertools
from typing import NamedTuple

import numpy as np
import pyarrow as pa

from .rollup_sql import ROLLUP_LEVELS

# the columns that name a scalar series: each worker (rank) of a job reports series of its own
SERIES_COLUMNS = ("job", "metric", "variant", "worker")
# the ``last`` of a row that takes points back out: smaller than any point's, so it never wins a maximum
_NO_LAST_X = -9_223_372_036_854_775_807
# the type of a ``last`` column, as the rollup and the series' summary (latest.py) store it: (x, inserted, value)
LAST_POINT = pa.struct([("x", pa.int64()), ("inserted", pa.timestamp("us")), ("value", pa.float64())])


class Rollup(NamedTuple):
    """Rollup rows, and the code of each row's series among the series they were built for."""

    rows: pa.Table
    codes: np.ndarray


def rollup_rows(
    points: pa.Table,
    codes: np.ndarray,
    series: list[tuple[str, str, str, str]],
    inserted_us: int,
    *,
    sign: int = 1,
    levels: dict[int, tuple[int, ...]] = ROLLUP_LEVELS,
) -> Rollup:
    """The rollup rows of ``points`` (columns ``iter``, ``ts``, ``value``), whose row ``i`` belongs to the
    series ``series[codes[i]]`` (job, metric, variant, worker), inserted at ``inserted_us`` (microseconds), with
    each row's code. The rows of a series come in iteration order (the writer's), so that of points at one x (the
    time axis) the last is the one of the highest iteration, as the SQL definition picks it.

    ``sign`` -1 gives the rows that take already-counted points back out of the sums (a replaced point):
    negative sums and counts, no minimum or maximum, and a last point that never wins.
    """
    iters = points.column("iter").to_numpy()
    ts_ms = points.column("ts").cast(pa.int64()).to_numpy()
    values = points.column("value").to_numpy()
    parts = [
        _axis_rows(codes, x, iters, values, axis, axis_levels)
        for axis, (x, axis_levels) in enumerate(((iters, levels[0]), (ts_ms, levels[1])))
    ]
    rows = {name: np.concatenate([p[name] for p in parts]) for name in parts[0]}
    count = len(rows["code"])
    names = [pa.array([s[i] for s in series], pa.string()) for i in range(len(SERIES_COLUMNS))]
    code_array = pa.array(rows["code"])
    if sign > 0:
        no_finite = rows["n"] == 0
        low = pa.array(rows["min"], mask=no_finite)
        high = pa.array(rows["max"], mask=no_finite)
        last = pa.StructArray.from_arrays(
            [
                pa.array(rows["last_x"]),
                pa.array(np.full(count, inserted_us, dtype=np.int64)).cast(pa.timestamp("us")),
                pa.array(rows["last_value"]),
            ],
            fields=list(LAST_POINT),
        )
    else:
        low = high = pa.nulls(count, pa.float64())
        last = pa.StructArray.from_arrays(
            [
                pa.array(np.full(count, _NO_LAST_X, dtype=np.int64)),
                pa.array(np.zeros(count, dtype=np.int64)).cast(pa.timestamp("us")),
                pa.array(np.zeros(count)),
            ],
            fields=list(LAST_POINT),
        )
    table = pa.table(
        {
            **{name: names[i].take(code_array) for i, name in enumerate(SERIES_COLUMNS)},
            "axis": pa.array(rows["axis"], pa.uint8()),
            "level": pa.array(rows["level"], pa.uint8()),
            "block": pa.array(rows["block"]),
            "sum": pa.array(sign * rows["sum"]),
            "n": pa.array(sign * rows["n"]),
            "count": pa.array(sign * rows["count"]),
            "min": low,
            "max": high,
            "last": last,
            "first_x": pa.array(rows["first_x"]),
            "last_x": pa.array(rows["last_x"]),
            "first_iter": pa.array(rows["first_iter"]),
            "last_iter": pa.array(rows["last_iter"]),
        }
    )
    return Rollup(table, rows["code"])


def _axis_rows(
    codes: np.ndarray, x: np.ndarray, iters: np.ndarray, values: np.ndarray, axis: int, levels: tuple[int, ...]
) -> dict[str, np.ndarray]:
    order = by_series_then_x(codes, x)
    if order is not None:
        codes, x, iters, values = codes[order], x[order], iters[order], values[order]
    finite = np.isfinite(values)
    # the finest level, grouped from the points: a block is a run of (series, x >> level)
    block = x >> levels[0]
    starts = _run_starts(codes, block)
    ends = np.append(starts[1:], len(codes)) - 1
    level_rows = {
        "code": codes[starts],
        "block": block[starts],
        "sum": np.add.reduceat(np.where(finite, values, 0.0), starts),
        "n": np.add.reduceat(finite.astype(np.int64), starts),
        "count": np.diff(np.append(starts, len(codes))),
        "min": np.minimum.reduceat(np.where(finite, values, np.inf), starts),
        "max": np.maximum.reduceat(np.where(finite, values, -np.inf), starts),
        "last_value": values[ends],
        "first_x": x[starts],
        "last_x": x[ends],
        "first_iter": np.minimum.reduceat(iters, starts),
        "last_iter": np.maximum.reduceat(iters, starts),
    }
    out = [_with_level(level_rows, axis, levels[0])]
    # each coarser level from the one below: its blocks join 2 ** (the levels apart), still in (series, block) order
    for below, level in itertools.pairwise(levels):
        block = level_rows["block"] >> (level - below)
        starts = _run_starts(level_rows["code"], block)
        if len(starts) == len(block):  # no two blocks join (a series' one point): the same rows, coarser blocks
            level_rows = {**level_rows, "block": block}
            out.append(_with_level(level_rows, axis, level))
            continue
        ends = np.append(starts[1:], len(block)) - 1
        level_rows = {
            "code": level_rows["code"][starts],
            "block": block[starts],
            "sum": np.add.reduceat(level_rows["sum"], starts),
            "n": np.add.reduceat(level_rows["n"], starts),
            "count": np.add.reduceat(level_rows["count"], starts),
            "min": np.minimum.reduceat(level_rows["min"], starts),
            "max": np.maximum.reduceat(level_rows["max"], starts),
            "last_value": level_rows["last_value"][ends],
            "first_x": level_rows["first_x"][starts],
            "last_x": level_rows["last_x"][ends],
            "first_iter": np.minimum.reduceat(level_rows["first_iter"], starts),
            "last_iter": np.maximum.reduceat(level_rows["last_iter"], starts),
        }
        out.append(_with_level(level_rows, axis, level))
    return {name: np.concatenate([rows[name] for rows in out]) for name in out[0]}


def _with_level(rows: dict[str, np.ndarray], axis: int, level: int) -> dict[str, np.ndarray]:
    size = len(rows["code"])
    return {**rows, "axis": np.full(size, axis, dtype=np.uint8), "level": np.full(size, level, dtype=np.uint8)}


def by_series(codes: np.ndarray) -> np.ndarray:
    """A stable order of the rows by series code: a radix sort where the codes fit 16 bits."""
    return np.argsort(codes.astype(np.uint16) if codes.max(initial=0) < 1 << 16 else codes, kind="stable")


def by_series_then_x(codes: np.ndarray, x: np.ndarray) -> np.ndarray | None:
    """An order of the rows by (series, x), stable; None when they are in that order already."""
    same = codes[1:] == codes[:-1]
    if np.all(codes[1:] >= codes[:-1]) and np.all(x[1:][same] >= x[:-1][same]):
        return None
    order = by_series(codes)
    sorted_codes, sorted_x = codes[order], x[order]
    same = sorted_codes[1:] == sorted_codes[:-1]
    if np.all(sorted_x[1:][same] >= sorted_x[:-1][same]):
        return order
    return np.lexsort((x, codes))


def _run_starts(codes: np.ndarray, block: np.ndarray) -> np.ndarray:
    changed = (codes[1:] != codes[:-1]) | (block[1:] != block[:-1])
    return np.flatnonzero(np.concatenate(([True], changed)))
