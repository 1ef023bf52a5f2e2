"""Step progress per worker (rank) of a job, from its scalar series: how far each worker got and how fast it goes.

A worker's progress is read over every scalar series it reported: its first and last iteration and time, the
points it reported, and its recent step rate. The rate is the iterations a worker advanced within a window (by
default the last ``RATE_WINDOW_MS`` before the job's last reported time) per second from its first point in the
window up to the job's last reported time, so a worker that stopped reporting falls behind as the others go on.
The window is read from the chart rollup's finest time blocks (``rollup.py``), so it starts at ``since_ms``
rounded up to a block (4.096 s) and its cost follows the number of blocks, not of points.

``ranking`` summarises a job's workers: the minimum, median and maximum rate, the median last iteration, and the
``worst`` slowest workers.
"""

from __future__ import annotations

import statistics
from dataclasses import asdict, dataclass
from typing import Any

from .engine import Engine
from .rollup_sql import ROLLUP_LEVELS

RATE_WINDOW_MS = 60_000
_TIME_LEVEL = ROLLUP_LEVELS[1][0]  # the finest time blocks: 2**12 ms


@dataclass(frozen=True)
class WorkerProgress:
    """How far one worker of a job got: over all its scalar series, the first and last iteration and time (epoch
    ms), the points it reported, and its recent step rate in iterations per second (None where it reported no
    point in the window, or the window holds no time)."""

    worker: str
    first_iter: int
    last_iter: int
    first_ts: int
    last_ts: int
    points: int
    rate: float | None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class Progress:
    def __init__(self, engine: Engine, db: str) -> None:
        self._engine = engine
        self._db = db

    def of(self, job: str, since_ms: int | None = None) -> list[WorkerProgress]:
        """Every worker of ``job`` that reported scalars, by name, with its progress; the rate is taken over the
        points from ``since_ms`` (epoch ms; default: ``RATE_WINDOW_MS`` before the job's last reported time) up
        to the job's last reported time. Two small queries (the series' summaries, the rollup's time blocks)."""
        totals = self._engine.query(
            f"""SELECT worker, min(first_iter) AS first_iter, max(last_iter) AS last_iter,
                toUnixTimestamp64Milli(min(first_ts)) AS first_ts, toUnixTimestamp64Milli(max(last_ts)) AS last_ts,
                toInt64(sum(points)) AS points
            FROM {self._db}.scalars_latest WHERE job = {{job:String}} GROUP BY worker ORDER BY worker""",
            {"job": job},
        ).to_pylist()
        if not totals:
            return []
        end = max(row["last_ts"] for row in totals)
        since = end - RATE_WINDOW_MS if since_ms is None else since_ms
        windows = self._window(job, since)
        out = []
        for row in totals:
            window = windows.get(row["worker"])
            rate = None
            if window is not None and end > window["t0"]:
                rate = (window["i1"] - window["i0"]) * 1000.0 / (end - window["t0"])
            out.append(WorkerProgress(**row, rate=rate))
        return out

    def _window(self, job: str, since_ms: int) -> dict[str, dict[str, int]]:
        """Per worker, the first time and the first and last iteration of its points in the blocks from
        ``since_ms`` (rounded up to a block) on."""
        size = 1 << _TIME_LEVEL
        rows = self._engine.query(
            f"""SELECT worker, min(first_x) AS t0, min(first_iter) AS i0, max(last_iter) AS i1
            FROM {self._db}.scalars_rollup
            WHERE job = {{job:String}} AND axis = 1 AND level = {_TIME_LEVEL} AND block >= {{block:Int64}}
            GROUP BY worker HAVING sum(count) > 0""",
            {"job": job, "block": -(-since_ms // size)},
        ).to_pylist()
        return {row.pop("worker"): row for row in rows}


def ranking(workers: list[WorkerProgress], worst: int = 3) -> dict[str, Any]:
    """The job's summary of ``workers``' progress: ``rate`` (``min``, ``median``, ``max`` over the workers with a
    rate), ``last_iter`` (``min``, ``median``, ``max``), and ``slowest``: the ``worst`` workers of lowest rate
    (a worker without one first), each as ``{worker, rate, last_iter}``."""
    rates = sorted(w.rate for w in workers if w.rate is not None)
    iters = sorted(w.last_iter for w in workers)
    ordered = sorted(workers, key=lambda w: (w.rate is not None, w.rate or 0.0, w.worker))
    return {
        "rate": _spread(rates),
        "last_iter": _spread(iters),
        "slowest": [{"worker": w.worker, "rate": w.rate, "last_iter": w.last_iter} for w in ordered[:worst]],
    }


def _spread(values: list[float] | list[int]) -> dict[str, float | None]:
    if not values:
        return {"min": None, "median": None, "max": None}
    return {"min": values[0], "median": statistics.median(values), "max": values[-1]}
