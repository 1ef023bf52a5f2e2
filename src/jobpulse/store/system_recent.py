"""The per-minute rollup of the system series this process wrote, kept in memory beside the table.

A live job's dashboard asks for the same window again and again while samples arrive every second, so
the memory of answers misses on nearly every request and each would be a query of the per-minute rollup
(10-25 ms on the embedded engine, most of it the engine's cost of any query). The store that sees every
write keeps here what the rollup holds for the jobs whose system samples it wrote from their first:
for every (worker, metric, device) and minute the sum, count, minimum, maximum and last sample, merged
as the rollup's columns merge. A series read at whole minutes or hours is then answered from here
without a query, the same buckets the rollup's query would give.

Which jobs are kept is ``recent.RecentJobs``' account: a job is kept only if the rollup held none of its
samples when this process first wrote some (a job written before a restart is read from the table), and
deleting a job's data, a failed insert, or keeping more than ``cells`` minutes of series in all (the jobs
written longest ago go first) ends the memory of a job in this process; its series are then read from the
table.
"""

from __future__ import annotations

import math
from array import array
from bisect import bisect_left, bisect_right
from collections.abc import Callable
from dataclasses import dataclass, field
from operator import truediv
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .recent import RecentJobs
from .rollup import by_series_then_x
from .series import row_keys

if TYPE_CHECKING:
    from .system import SeriesWindow

MINUTE_MS = 60_000
HOUR_MS = 3_600_000
_KEY = ("worker", "metric", "device")


class _Minutes:
    """One series' minutes in time order, a column each, merged as the rollup's columns merge: sums and
    counts add, minimum and maximum skip NaN unless every value is NaN, and the last sample is the one of
    the latest time."""

    __slots__ = ("minute", "sum", "count", "min", "max", "last_ts", "last")

    def __init__(self) -> None:
        self.minute = array("q")
        self.sum = array("d")
        self.count = array("q")
        self.min = array("d")
        self.max = array("d")
        self.last_ts = array("q")
        self.last = array("d")

    def extend(self, rows: tuple[list, ...]) -> None:
        """Append minutes that all come after the last one kept."""
        for column, values in zip(self._columns(), rows, strict=True):
            column.extend(values)

    def merge(self, minute: int, total: float, count: int, low: float, high: float, last_ts: int, last: float) -> None:
        """Add one minute's aggregate, merged into the minute if it is kept already."""
        i = bisect_left(self.minute, minute)
        if i == len(self.minute) or self.minute[i] != minute:
            for column, value in zip(self._columns(), (minute, total, count, low, high, last_ts, last), strict=True):
                column.insert(i, value)
            return
        self.sum[i] += total
        self.count[i] += count
        self.min[i] = _fmin(self.min[i], low)
        self.max[i] = _fmax(self.max[i], high)
        if last_ts > self.last_ts[i]:  # the writer stores one sample of a series at one time
            self.last_ts[i], self.last[i] = last_ts, last

    def _columns(self) -> tuple[array, ...]:
        return (self.minute, self.sum, self.count, self.min, self.max, self.last_ts, self.last)


def _fmin(a: float, b: float) -> float:
    return b if math.isnan(a) else a if math.isnan(b) else min(a, b)


def _fmax(a: float, b: float) -> float:
    return b if math.isnan(a) else a if math.isnan(b) else max(a, b)


@dataclass
class _Job:
    deletions: int
    series: dict[tuple[str, str, str], _Minutes] = field(default_factory=dict)
    size: int = 0  # minutes of series


class RecentSystem(RecentJobs[_Job]):
    """The per-minute rollup of the jobs whose system samples this process wrote from their first, up to
    ``cells`` minutes of series in all. ``deletions(job)``: how many deletions of the job's data have ended,
    so that a deletion ends the memory of the job. A write of a job ``unknown`` here must first ``begin`` it
    (the rollup holds none of its samples) or ``refuse`` it."""

    def __init__(self, cells: int, deletions: Callable[[str], int]) -> None:
        super().__init__(cells, deletions, _Job)

    @property
    def cells(self) -> int:
        """How many minutes of series are kept now."""
        return self.size

    def add(self, samples: pa.Table) -> None:
        """Count the samples the rollup was just given (columns job, worker, metric, device, ts, value)."""
        self.merge(samples, _add_minutes)

    def series(self, job: str, metrics: list[str], window: SeriesWindow) -> list[dict[str, Any]] | None:
        """The series the rollup would answer for ``window`` (whole minutes from a whole minute; the minutes of
        the period, hour or minute, in which its end falls included) of ``metrics``, ordered by worker, metric
        and device; None where ``job`` is not kept."""
        start_ms, end_ms, step_ms = window.start_ms, window.end_ms, window.step_ms
        if step_ms % MINUTE_MS or start_ms % MINUTE_MS:
            return None
        period = HOUR_MS if step_ms % HOUR_MS == 0 and start_ms % HOUR_MS == 0 else MINUTE_MS
        stop = end_ms - end_ms % period + period
        # as the table's query filters: no workers named is every worker, no devices named is none
        workers, devices = window.workers, window.devices
        wanted = (set(metrics), set(workers) if workers else None, None if devices is None else set(devices))
        with self.lock:
            kept = self.current(job)
            if kept is None:
                return None
            found = []
            for key in sorted(k for k in kept.series if _selected(k, wanted)):
                minutes = kept.series[key]
                lo, hi = bisect_left(minutes.minute, start_ms), bisect_left(minutes.minute, stop)
                if lo < hi:
                    found.append({**dict(zip(_KEY, key, strict=True)), **_buckets(minutes, lo, hi, start_ms, step_ms)})
            return found


def _selected(key: tuple[str, str, str], wanted: tuple[set[str], set[str] | None, set[str] | None]) -> bool:
    """Whether the series ``key`` (worker, metric, device) is one of ``wanted`` (metrics, workers, devices)."""
    (worker, metric, device), (metrics, workers, devices) = key, wanted
    return metric in metrics and (workers is None or worker in workers) and (devices is None or device in devices)


def _buckets(minutes: _Minutes, lo: int, hi: int, start_ms: int, step_ms: int) -> dict[str, list]:
    """The buckets of the kept minutes ``lo:hi``: bucket starts ``t``, then avg, min, max, last and count."""
    if step_ms == MINUTE_MS:  # a bucket a minute: the minutes as they are
        return {
            "t": minutes.minute[lo:hi].tolist(),
            "avg": list(map(truediv, minutes.sum[lo:hi], minutes.count[lo:hi])),
            "min": minutes.min[lo:hi].tolist(),
            "max": minutes.max[lo:hi].tolist(),
            "last": minutes.last[lo:hi].tolist(),
            "count": minutes.count[lo:hi].tolist(),
        }
    out: dict[str, list] = {name: [] for name in ("t", "avg", "min", "max", "last", "count")}
    i = lo
    while i < hi:
        b = (minutes.minute[i] - start_ms) // step_ms
        end = bisect_right(minutes.minute, start_ms + (b + 1) * step_ms - 1, i, hi)
        total, count = sum(minutes.sum[i:end]), sum(minutes.count[i:end])
        low, high = minutes.min[i], minutes.max[i]
        last_at, last = i, minutes.last[i]
        for j in range(i + 1, end):
            low, high = _fmin(low, minutes.min[j]), _fmax(high, minutes.max[j])
            if minutes.last_ts[j] > minutes.last_ts[last_at]:
                last_at, last = j, minutes.last[j]
        for name, value in zip(out, (start_ms + b * step_ms, total / count, low, high, last, count), strict=True):
            out[name].append(value)
        i = end
    return out


def _add_minutes(job: _Job, samples: pa.Table) -> None:
    """Merge the per-minute aggregates of one job's ``samples`` into its kept series."""
    ts = pc.cast(samples.column("ts"), pa.int64()).to_numpy()
    values = samples.column("value").to_numpy()
    codes, names = row_keys(samples, _KEY)
    order = by_series_then_x(codes, ts)  # None for rows sent series by series, in time order
    if order is not None:
        codes, ts, values = codes[order], ts[order], values[order]
    minute = ts - ts % MINUTE_MS
    starts = np.flatnonzero(np.concatenate(([True], (codes[1:] != codes[:-1]) | (minute[1:] != minute[:-1]))))
    ends = np.append(starts[1:], len(ts)) - 1
    with np.errstate(invalid="ignore", over="ignore"):  # infinities of both signs sum to NaN, as in the table
        sums = np.add.reduceat(values, starts)
    groups = (
        codes[starts].tolist(),
        minute[starts].tolist(),
        sums.tolist(),
        np.diff(np.append(starts, len(ts))).tolist(),
        np.fmin.reduceat(values, starts).tolist(),
        np.fmax.reduceat(values, starts).tolist(),
        ts[ends].tolist(),
        values[ends].tolist(),
    )
    # each series' minutes in one run; a run after every kept minute of its series is appended whole
    runs = np.flatnonzero(np.concatenate(([True], np.diff(np.asarray(groups[0])) != 0)))
    for lo, hi in zip(runs.tolist(), [*runs[1:].tolist(), len(starts)], strict=True):
        key = names[groups[0][lo]]
        kept = job.series.get(key)
        if kept is None:
            kept = job.series[key] = _Minutes()
        if not kept.minute or kept.minute[-1] < groups[1][lo]:
            kept.extend(tuple(column[lo:hi] for column in groups[1:]))
            job.size += hi - lo
            continue
        for row in zip(*(column[lo:hi] for column in groups[1:]), strict=True):
            size = len(kept.minute)
            kept.merge(*row)
            job.size += len(kept.minute) - size
