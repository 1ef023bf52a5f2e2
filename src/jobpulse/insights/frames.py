"""The data of one job as the detectors see it: per-minute matrices on one time axis.

``load`` reads the data of many jobs over one window with a few queries (``store/insight_data.py``) and cuts it
into one ``JobData`` per job: for each metric a matrix with a row per (worker, device) and a column per minute,
NaN where a minute has no sample.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa

from ..store import Store
from ..store.system import MINUTE_MS

# What the detectors read from the system series.
METRICS = (
    "gpu_util",
    "gpu_mem_util",
    "cpu_util",
    "cpu_iowait",
    "mem_util",
    "gpu_ecc_corrected",
    "gpu_ecc_uncorrected",
    "gpu_xid_errors",
    "gpu_xid",
    "gpu_throttle_thermal",
    "gpu_throttle_power",
)


@dataclass
class Matrix:
    """Rows named by ``keys`` (worker, device, or metric and variant), a column per minute of the window."""

    keys: list[tuple[str, str]]
    values: dict[str, np.ndarray]  # name -> float matrix [rows x minutes]

    def __getitem__(self, name: str) -> np.ndarray:
        return self.values[name]

    def by_worker(self, name: str) -> tuple[list[str], np.ndarray]:
        """The rows of ``name`` averaged over each worker's devices: (workers, matrix)."""
        workers = sorted({w for w, _ in self.keys})
        index = {w: i for i, w in enumerate(workers)}
        rows = np.array([index[w] for w, _ in self.keys], dtype=np.int64)
        values = self.values[name]
        finite = np.isfinite(values)
        sums = np.zeros((len(workers), values.shape[1]))
        counts = np.zeros_like(sums)
        np.add.at(sums, rows, np.where(finite, values, 0.0))
        np.add.at(counts, rows, finite)
        with np.errstate(invalid="ignore", divide="ignore"):
            return workers, np.where(counts > 0, sums / np.maximum(counts, 1), np.nan)


@dataclass
class JobData:
    job: str
    project: str
    started: int  # ms
    now_ms: int
    final: bool  # the job has ended: every condition still holding ends at ``now_ms``
    times: np.ndarray  # minute starts, ms
    system: dict[str, Matrix] = field(default_factory=dict)
    steps: Matrix | None = None  # rows (worker, ""): "top" (highest iteration), "points"
    scalars: Matrix | None = None  # rows (metric, variant): "bad", "top", "mid"
    logs: Matrix | None = None  # rows (worker, ""): "lines"
    workers: dict[str, tuple[str, int | None]] = field(default_factory=dict)  # worker -> (status, started)
    first_progress: int | None = None  # ms of the first scalar point or log line

    @property
    def minutes(self) -> int:
        return len(self.times)

    def metric(self, name: str) -> Matrix | None:
        found = self.system.get(name)
        return found if found is not None and found.keys else None

    @functools.cached_property
    def coverage(self) -> np.ndarray:
        """Per minute, the share of it the job has run (0 to 1): 1 but for the minute it started in, the minute of
        ``now_ms``, and minutes outside the job. Durations are measured in it, so that the few seconds of a job's
        first or last minute count as what they are, not as a whole minute."""
        began = np.maximum(self.times, self.started)
        ended = np.minimum(self.times + MINUTE_MS, self.now_ms)
        return np.clip((ended - began) / MINUTE_MS, 0.0, 1.0)

    def after(self, ms: int) -> np.ndarray:
        """A mask of the minutes that start at or after ``ms``."""
        return self.times >= ms - ms % MINUTE_MS


def load(store: Store, jobs: list[dict[str, Any]], first_minute: int, now_ms: int, *, final: bool) -> list[JobData]:
    """The data of ``jobs`` (rows with job, project, started, and ``first_progress`` where already read) from
    ``first_minute`` to the minute of ``now_ms``."""
    if not jobs:
        return []
    names = [j["job"] for j in jobs]
    last_minute = now_ms - now_ms % MINUTE_MS
    times = np.arange(first_minute, last_minute + 1, MINUTE_MS, dtype=np.int64)
    data = store.insight_data
    system = _rollup_frame(data.system(names, list(METRICS), first_minute, last_minute), times)
    steps = _frame(data.steps(names, first_minute, last_minute), times, ("top", "points"))
    scalars = _frame(data.scalar_health(names, first_minute, last_minute), times, ("bad", "top", "mid"))
    logs = _frame(data.log_lines(names, first_minute, last_minute), times, ("lines",))
    workers = _workers(data.workers(names))
    known = {j["job"]: j["first_progress"] for j in jobs if "first_progress" in j}
    asked = [name for name in names if name not in known]
    firsts = {**(data.first_progress(asked) if asked else {}), **known}
    out = []
    for row in jobs:
        job = row["job"]
        one = JobData(job, row["project"], int(row["started"] or first_minute), now_ms, final, times)
        one.system = system.by_job_and(job, "metric", ("worker", "device"))
        one.steps = steps.of_job(job, ("worker",))
        one.scalars = scalars.of_job(job, ("metric", "variant"))
        one.logs = logs.of_job(job, ("worker",))
        one.workers = workers.get(job, {})
        one.first_progress = firsts.get(job)
        out.append(one)
    return out


class _Frame:
    """A query's rows (sorted by job) as dense matrices on the window's minutes, with the row ranges of each job."""

    def __init__(self, table: pa.Table, dense: dict[str, np.ndarray]) -> None:
        self._columns = {name: table.column(name).to_pylist() for name in table.column_names if name not in dense}
        self._dense = dense
        self._jobs: dict[str, tuple[int, int]] = {}
        for i, job in enumerate(self._columns.get("job", [])):
            first, _ = self._jobs.get(job, (i, i))
            self._jobs[job] = (first, i + 1)

    def _matrix(self, lo: int, hi: int, key_columns: tuple[str, ...]) -> Matrix:
        columns = [self._columns[c][lo:hi] for c in key_columns]
        keys = list(zip(*columns, strict=True)) if len(columns) == 2 else [(k, "") for k in columns[0]]
        return Matrix(keys, {name: values[lo:hi] for name, values in self._dense.items()})

    def of_job(self, job: str, key_columns: tuple[str, ...]) -> Matrix:
        lo, hi = self._jobs.get(job, (0, 0))
        return self._matrix(lo, hi, key_columns)

    def by_job_and(self, job: str, group: str, key_columns: tuple[str, ...]) -> dict[str, Matrix]:
        """The rows of ``job`` split by the value of column ``group`` (rows of one value are contiguous)."""
        lo, hi = self._jobs.get(job, (0, 0))
        out: dict[str, Matrix] = {}
        values = self._columns.get(group, [])
        start = lo
        for i in range(lo, hi + 1):
            if i == hi or values[i] != values[start]:
                if i > start:
                    out[values[start]] = self._matrix(start, i, key_columns)
                start = i
        return out


def _frame(table: pa.Table, times: np.ndarray, names: tuple[str, ...]) -> _Frame:
    """Dense [rows x minutes] matrices of the array columns ``names`` of ``table`` (NaN where a row has no value for
    a minute), filled without a loop per row."""
    rows, width = table.num_rows, len(times)
    dense = {name: np.full((rows, width), np.nan) for name in names}
    if rows and width:
        at_row, at_col, keep = _positions(table, times)
        for name in names:
            dense[name][at_row[keep], at_col[keep]] = _flat(table, name)[keep]
    return _Frame(table.drop_columns(["minutes", *names]), dense)


def _positions(table: pa.Table, times: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For every value of the array columns: its row, its minute's column, and whether that lies in the window."""
    minutes = table.column("minutes").combine_chunks()
    at_row = np.repeat(np.arange(table.num_rows), np.diff(minutes.offsets.to_numpy()))
    at_col = (minutes.flatten().to_numpy(zero_copy_only=False).astype(np.int64) - int(times[0])) // MINUTE_MS
    return at_row, at_col, (at_col >= 0) & (at_col < len(times))


def _flat(table: pa.Table, name: str) -> np.ndarray:
    return table.column(name).combine_chunks().flatten().to_numpy(zero_copy_only=False).astype(np.float64)


def _rollup_frame(table: pa.Table, times: np.ndarray) -> _Frame:
    """``avg``, ``min`` and ``max`` per minute from rollup rows (sum, count, min, max), a minute's rows combined."""
    shape = (table.num_rows, len(times))
    size = shape[0] * shape[1]
    sums, counts = np.zeros(size), np.zeros(size)
    low, high = np.full(size, np.nan), np.full(size, np.nan)
    if size:
        at_row, at_col, keep = _positions(table, times)
        cell = at_row[keep] * shape[1] + at_col[keep]
        sums = np.bincount(cell, _flat(table, "sum")[keep], minlength=size)
        counts = np.bincount(cell, _flat(table, "count")[keep], minlength=size)
        mins, maxs = _flat(table, "min")[keep], _flat(table, "max")[keep]
        low[cell], high[cell] = mins, maxs  # one row per minute, but for minutes not merged yet:
        repeated = np.bincount(cell, minlength=size)[cell] > 1
        np.fmin.at(low, cell[repeated], mins[repeated])
        np.fmax.at(high, cell[repeated], maxs[repeated])
    seen = counts > 0
    with np.errstate(invalid="ignore", divide="ignore"):
        dense = {"avg": np.where(seen, sums / np.where(seen, counts, 1), np.nan), "min": low, "max": high}
    for name, values in dense.items():
        values[~np.isfinite(values)] = np.nan
        dense[name] = values.reshape(shape)
    return _Frame(table.drop_columns(["minutes", "sum", "count", "min", "max"]), dense)


def _workers(table: pa.Table) -> dict[str, dict[str, tuple[str, int | None]]]:
    out: dict[str, dict[str, tuple[str, int | None]]] = {}
    for row in table.to_pylist():
        out.setdefault(row["job"], {})[row["worker"]] = (row["status"], row["started"])
    return out


def chunks(items: list[Any], size: int) -> Iterator[list[Any]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]
