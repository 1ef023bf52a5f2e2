"""The scalar rollups in SQL: the chart blocks' levels, a series' summary row and the chart rollup's rows, as
the schema's steps rebuild them from stored points (the writer computes the same rows itself: rollup.py, latest.py)."""

from __future__ import annotations

# Block sizes of the scalar rollup, as powers of two: iterations (axis 0) and milliseconds (axis 1), as many
# levels on each axis, every other power of two up to the coarsest: 2**20 iterations, 2**26 ms (18.6 hours). Each
# axis's first level is grouped from the points; the coarser ones from those groups. A chart of N buckets reads
# between 4N and 16N rollup rows whatever its range (a chart wider than 4,000 M iterations or, at 1,000 buckets,
# eight years, more). A batch writes a row per level for each series of it, and a fleet's batch holds one point of
# each of many series: every level costs a row per point, and a level per power of two (as schema steps 4 to 17
# kept) made the rollup most of a small batch's write (a group of 30 batches of 200 series: 229-237 ms written
# with a level per power of two, 151-159 ms with every other one; a 1,000-bucket chart of 4 M points from the
# memory of chart_recent.py 2.5 -> 3.6 ms).
ROLLUP_LEVELS = {0: tuple(range(6, 21, 2)), 1: tuple(range(12, 27, 2))}
# The levels of schema steps 16 and 17: a level per power of two, up to the same coarsest.
STEP16_LEVELS = {0: tuple(range(6, 21)), 1: tuple(range(12, 27))}
# The levels of schema steps 4 to 15: written by the steps that rebuild the rollup as it was then.
STEP4_LEVELS = {0: tuple(range(6, 25)), 1: tuple(range(12, 31))}
# The levels schema step 2 created (every fourth power of two), kept so that step reads as written.
STEP2_LEVELS = {0: (6, 10, 14, 18), 1: (12, 16, 20, 24)}


# Each series' summary row over the points of ``source`` (``scalars_latest``): what the writer inserts per
# batch (store/latest.py); the last point is the one of the highest iteration, inserted last.
LATEST_SELECT = """SELECT job, metric, variant, max((iter, inserted, value)) AS last,
    min(iter) AS first_iter, max(iter) AS last_iter, min(ts) AS first_ts, max(ts) AS last_ts,
    minIfOrNull(value, isFinite(value)) AS min_value, maxIfOrNull(value, isFinite(value)) AS max_value,
    uniqExact(iter) AS points
FROM {source} GROUP BY job, metric, variant"""


def rollup_select(source: str, *, last: str = "tuple", levels: dict[int, tuple[int, ...]] = ROLLUP_LEVELS) -> str:
    """Aggregate scalar rows of ``source`` into the blocks of every rollup level: the rollup in SQL, which
    upgrades rebuild from the stored points (the writer computes the same blocks with numpy, ``rollup.py``).

    ``last`` is the form of the rollup's last-value column: ``"tuple"`` (schema step 4 on) is the
    largest ``(x, inserted, value)``, a plain maximum that is cheap to read; ``"state"`` is the
    ``argMax`` state that step 2 created (kept so that step reads as it did when it was written).
    """
    finest = ", ".join(f"({axis}, {of_axis[0]})" for axis, of_axis in levels.items())
    steps = ", ".join(str(level - levels[0][0]) for level in levels[0])
    if last == "state":
        point, merged = "argMax(value, (x, inserted)) AS lv, max((x, inserted)) AS lk", "argMaxState(lv, lk)"
    else:
        # within one insert every row has the same ``inserted``: the last point is the one of largest x,
        # and of points at the same x (the time axis) the one of the highest iteration
        point, merged = "(max(x), max(inserted), argMax(value, (x, iter))) AS lt", "max(lt)"
    return f"""SELECT job, metric, variant, axis, base + shift AS level,
            intDiv(fine, bitShiftLeft(toInt64(1), shift)) - (fine % bitShiftLeft(toInt64(1), shift) < 0) AS block,
            sum(fsum) AS sum, sum(fn) AS n, sum(fcount) AS count,
            min(min) AS min, max(max) AS max, {merged} AS last,
            min(fx) AS first_x, max(lx) AS last_x, min(fi) AS first_iter, max(li) AS last_iter
        FROM (
            SELECT job, metric, variant, axis, base, intDiv(x, size) - (x % size < 0) AS fine,
                sumIf(value, isFinite(value)) AS fsum, toInt64(countIf(isFinite(value))) AS fn,
                toInt64(count()) AS fcount, minIfOrNull(value, isFinite(value)) AS min,
                maxIfOrNull(value, isFinite(value)) AS max, {point},
                min(x) AS fx, max(x) AS lx, min(iter) AS fi, max(iter) AS li
            FROM (SELECT job, metric, variant, iter, value, inserted,
                         arrayJoin([{finest}]) AS al, al.1 AS axis, al.2 AS base,
                         if(axis = 0, iter, toUnixTimestamp64Milli(ts)) AS x, bitShiftLeft(toInt64(1), base) AS size
                  FROM {source})
            GROUP BY job, metric, variant, axis, base, fine)
        ARRAY JOIN [{steps}] AS shift
        GROUP BY job, metric, variant, axis, level, block"""


def by_worker(select: str) -> str:
    """``LATEST_SELECT`` or a ``rollup_select`` grouped per worker too: from the step that made the worker part of a
    scalar's key on, each worker (rank) of a job has series of its own."""
    return select.replace("job, metric, variant", "job, metric, variant, worker")
