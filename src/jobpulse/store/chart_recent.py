"""The chart rollup's coarse blocks of the scalar series this process wrote, kept in memory beside the table.

A chart of a long series reads a few thousand blocks of the chart rollup (``scalars_rollup``, see
``rollup.py``): its cost is the embedded engine's for any query of that size, 12-30 ms, more than the rest of
the request together, and a live job's chart changes with every batch, so the memory of answers misses on
nearly every refresh. The store that sees every write keeps here what the rollup holds at its coarse levels
(blocks of at least ``KEPT_LEVELS`` per axis: 256 iterations, 65.5 s) for the jobs whose points it wrote from
their first: per series (job, metric, variant and worker), axis, level and block the sums, counts, finite
minimum and maximum, last point and x range, merged as the table merges them. The chart of a series that reads
one of these levels (the whole of a series of millions of points, or days of one) is then computed from here
without a query: the same buckets the rollup's query gives.

A job's blocks are runs of rows sorted by series key (series, axis, level) and block, one row per block in a
run: a batch's rows make a run of their own, and the last two runs are merged while the last holds at least
half as many rows as the one before (so a row is merged again a logarithmic number of times, and a job holds
a few runs). A chart reads its key's rows of every run and merges them as it groups them into buckets.

Which jobs are kept is ``recent.RecentJobs``' account (from their first point, until a deletion of their
data, a failed write, or ``blocks`` blocks in all, the jobs written longest ago going first).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa

from .recent import RecentJobs

KEPT_LEVELS = {0: 8, 1: 16}  # per axis (0: iterations, 1: milliseconds), the finest level kept
_SUMS = ("sum", "n", "count")
_LOWEST = ("min", "first_x", "first_iter")
_HIGHEST = ("max", "last_x", "last_iter")
_LAST = ("last_at", "last_inserted", "last_value")  # the block's last point, the greatest (x, inserted, value)
_COLUMNS = ("key", "block", *_SUMS, *_LOWEST, *_HIGHEST, *_LAST)
Blocks = dict[str, np.ndarray]  # a column each, sorted by key and block, one row per key and block
# jobs of one batch merged by one sort: their number goes above a key's 48 bits (series << 16 | axis << 8 | level)
_JOBS_AT_ONCE = 1 << 14


@dataclass
class _Job:
    deletions: int
    # metric -> variant -> worker -> its series' number (each worker, or rank, reports series of its own)
    ids: dict[str, dict[str, dict[str, int]]] = field(default_factory=dict)
    series: int = 0  # numbers given
    runs: list[Blocks] = field(default_factory=list)  # rows sorted by key and block; the later, the shorter
    size: int = 0  # rows of all runs

    def add(self, rows: Blocks) -> None:
        """Add a run of ``rows``, then merge the last two runs while the last is not much shorter."""
        self.runs.append(rows)
        while len(self.runs) > 1 and 2 * len(self.runs[-1]["key"]) >= len(self.runs[-2]["key"]):
            last = self.runs.pop()
            self.runs[-1] = _merged({name: np.concatenate((self.runs[-1][name], last[name])) for name in _COLUMNS})
        self.size = sum(len(run["key"]) for run in self.runs)

    def rows(self, key: int, blocks: tuple[int, int]) -> Blocks:
        """The rows of every run of ``key`` whose block is in ``blocks`` (first, last)."""
        parts = []
        for run in self.runs:
            lo, hi = np.searchsorted(run["key"], key), np.searchsorted(run["key"], key, "right")
            first = lo + np.searchsorted(run["block"][lo:hi], blocks[0])
            last = lo + np.searchsorted(run["block"][lo:hi], blocks[1], "right")
            parts.append({name: column[first:last] for name, column in run.items()})
        return {name: np.concatenate([part[name] for part in parts]) for name in _COLUMNS}


def _key(series: int | np.ndarray, axis: int | np.ndarray, level: int | np.ndarray) -> int | np.ndarray:
    """The number of a series' (axis, level): rows sort by it and block."""
    return (series << 16) | (axis << 8) | level


class RecentCharts(RecentJobs[_Job]):
    """The chart rollup's blocks at ``levels`` and coarser of the jobs whose points this process wrote from their
    first, up to ``blocks`` blocks in all (~110 bytes each). ``deletions(job)``: how many deletions of the job's
    data have ended. A write of a job ``unknown`` here must first ``begin`` it (the rollup holds none of its
    blocks) or ``refuse`` it."""

    def __init__(self, blocks: int, deletions: Callable[[str], int], levels: dict[int, int] = KEPT_LEVELS) -> None:
        super().__init__(blocks, deletions, _Job)
        self._levels = levels

    @property
    def blocks(self) -> int:
        """How many blocks are kept now."""
        return self.size

    def add(self, rows: pa.Table, codes: np.ndarray, names: list[tuple[str, str, str, str]]) -> None:
        """Merge the rollup rows the table was just given (``rollup.rollup_rows``: counting points or taking them
        back out), those of the kept levels; row ``i`` is of the series ``names[codes[i]]`` (job, metric, variant,
        worker)."""
        axis = rows.column("axis").to_numpy()
        level = rows.column("level").to_numpy()
        coarse = level >= np.where(axis == 0, self._levels[0], self._levels[1])
        if not coarse.any():
            return
        with self.lock:
            kept = [(name, job) for name in dict.fromkeys(n[0] for n in names) if (job := self._written(name))]
            number = {name: i for i, (name, _) in enumerate(kept)}
            job_of = np.array([number.get(job, -1) for job, *_ in names], dtype=np.int64)[codes]
            series = np.array(
                [_series_id(kept[number[job]][1], *rest) if job in number else -1 for job, *rest in names],
                dtype=np.int64,
            )[codes]
            for first in range(0, len(kept), _JOBS_AT_ONCE):
                chunk = kept[first : first + _JOBS_AT_ONCE]
                mine = coarse & (job_of >= first) & (job_of < first + len(chunk))  # the finer levels are not kept
                ids = np.where(mine, ((job_of - first) << 32) | series, -1)
                for (name, job), run in zip(chunk, _runs_by_job(rows, ids, len(chunk)), strict=True):
                    if run is not None and self.current(name) is job:  # still kept: another job's growth may end it
                        before = job.size
                        job.add(run)
                        self._grown(job, before)

    def chart(
        self,
        jobs: list[str],
        metric: str,
        variants: list[str] | None,
        *,
        axis: int,
        level: int,
        blocks: tuple[int, int],
        lo: int,
        width: int,
        chosen: set[tuple[str, str, str]] | None = None,
    ) -> pa.Table | None:
        """What the rollup's chart query answers for buckets of ``width`` from ``lo`` over the blocks ``blocks``
        (first, last) of ``level``: per job, variant, worker and bucket ``b``, mean, min, max, last, count, x_first
        and x_last, ordered by job, variant, worker and b; only the (job, variant, worker) series ``chosen`` (all:
        None). None unless every one of ``jobs`` is kept and ``level`` is."""
        if level < self._levels[axis]:
            return None
        size = 1 << level
        parts = []
        with self.lock:
            kept = [self.current(name) for name in jobs]
            if any(job is None for job in kept):
                return None
            for name, job in sorted(zip(jobs, kept, strict=True), key=lambda pair: pair[0]):
                for variant, workers in sorted(job.ids.get(metric, {}).items()):
                    if variants is not None and variant not in variants:
                        continue
                    for worker, series in sorted(workers.items()):
                        if chosen is None or (name, variant, worker) in chosen:
                            part = _buckets(job.rows(_key(series, axis, level), blocks), size, lo, width)
                            if part is not None:
                                parts.append((name, variant, worker, part))
        return _table(parts)


def _runs_by_job(rows: pa.Table, ids: np.ndarray, jobs: int) -> list[Blocks | None]:
    """The rollup ``rows`` as a run per job, the job numbered ``ids >> 32`` (-1: a job not kept), keyed by its number
    of their series (``ids``' low 32 bits), one row per key and block; None for a job without rows. One sort for
    every job of a batch: a fleet's batch holds many."""
    mine = ids >= 0
    if not mine.any():
        return [None] * jobs
    axis = rows.column("axis").to_numpy().astype(np.int64)
    level = rows.column("level").to_numpy().astype(np.int64)
    columns = {"key": _key(ids, axis, level), **_columns(rows)}
    merged = _merged(columns if mine.all() else {name: column[mine] for name, column in columns.items()})
    job_of = merged["key"] >> 48
    bounds = np.searchsorted(job_of, np.arange(jobs + 1))
    merged["key"] &= (1 << 48) - 1
    return [
        {name: column[lo:hi] for name, column in merged.items()} if hi > lo else None
        for lo, hi in zip(bounds[:-1], bounds[1:], strict=True)
    ]


def _series_id(job: _Job, metric: str, variant: str, worker: str) -> int:
    """The number of a series of ``job`` in its keys, given at its first rows."""
    workers = job.ids.setdefault(metric, {}).setdefault(variant, {})
    if worker not in workers:
        workers[worker], job.series = job.series, job.series + 1
    return workers[worker]


def _columns(rows: pa.Table) -> Blocks:
    """The rollup rows as numpy columns: a minimum or maximum missing (no finite value) as +inf or -inf, which
    no finite value is, so that it never wins and reads as missing again."""
    last = rows.column("last").combine_chunks()
    return {
        "block": rows.column("block").to_numpy(),
        **{name: rows.column(name).to_numpy() for name in _SUMS},
        "min": rows.column("min").fill_null(np.inf).to_numpy(),
        "max": rows.column("max").fill_null(-np.inf).to_numpy(),
        **{name: rows.column(name).to_numpy() for name in ("first_x", "first_iter", "last_x", "last_iter")},
        "last_at": last.field("x").to_numpy(),
        "last_inserted": last.field("inserted").cast(pa.int64()).to_numpy(),
        "last_value": last.field("value").to_numpy(),
    }


def _merged(rows: Blocks) -> Blocks:
    """One row per key and block of ``rows`` (any order), merged as the table's columns merge."""
    order = np.lexsort((rows["last_value"], rows["last_inserted"], rows["last_at"], rows["block"], rows["key"]))
    rows = {name: column[order] for name, column in rows.items()}
    key, block = rows["key"], rows["block"]
    starts = np.flatnonzero(np.concatenate(([True], (block[1:] != block[:-1]) | (key[1:] != key[:-1]))))
    ends = np.append(starts[1:], len(block)) - 1  # each block's greatest last point, by the order above
    with np.errstate(invalid="ignore", over="ignore"):  # infinities of both signs sum to NaN, as in the table
        out = {name: np.add.reduceat(rows[name], starts) for name in _SUMS}
    out.update({name: np.minimum.reduceat(rows[name], starts) for name in _LOWEST})
    out.update({name: np.maximum.reduceat(rows[name], starts) for name in _HIGHEST})
    out.update({name: rows[name][ends] for name in ("key", "block", *_LAST)})
    return out


def _buckets(rows: Blocks, size: int, lo: int, width: int) -> Blocks | None:
    """The buckets of ``width`` from ``lo`` over the blocks ``rows`` of one series (any order, a block in several
    rows), as the rollup's chart query groups them; None where none holds points."""
    b = (rows["block"] * size - lo) // width
    order = np.lexsort((rows["last_value"], rows["last_inserted"], rows["last_at"], b))
    rows, b = {name: column[order] for name, column in rows.items()}, b[order]
    if not len(b):
        return None
    starts = np.flatnonzero(np.concatenate(([True], b[1:] != b[:-1])))
    ends = np.append(starts[1:], len(b)) - 1
    with np.errstate(invalid="ignore", over="ignore"):
        total, n, count = (np.add.reduceat(rows[name], starts) for name in _SUMS)
    out = {
        "b": b[starts],
        "total": total,
        "n": n,
        "min": np.minimum.reduceat(rows["min"], starts),
        "max": np.maximum.reduceat(rows["max"], starts),
        "last": rows["last_value"][ends],
        "count": count,
        "x_first": np.minimum.reduceat(rows["first_x"], starts),
        "x_last": np.maximum.reduceat(rows["last_x"], starts),
    }
    held = out["count"] > 0  # buckets whose points were all taken back out are not answered
    return {name: column[held] for name, column in out.items()} if held.any() else None


def _table(parts: list[tuple[str, str, str, Blocks]]) -> pa.Table:
    """The buckets of each (job, variant, worker, buckets) of ``parts`` as one table of the chart query's columns."""

    def joined(name: str) -> np.ndarray:
        return np.concatenate([part[-1][name] for part in parts]) if parts else np.zeros(0)

    def repeated(at: int) -> pa.Array:
        return pa.array(np.repeat([part[at] for part in parts], lengths).tolist(), pa.string())

    lengths = [len(part[-1]["b"]) for part in parts]
    n, low, high = joined("n"), joined("min"), joined("max")
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = joined("total") / n
    return pa.table(
        {
            "job": repeated(0),
            "variant": repeated(1),
            "worker": repeated(2),
            "b": pa.array(joined("b").astype(np.int64)),
            "mean": pa.array(mean, pa.float64(), mask=n == 0),
            "min": pa.array(low, pa.float64(), mask=np.isposinf(low)),
            "max": pa.array(high, pa.float64(), mask=np.isneginf(high)),
            "last": pa.array(joined("last"), pa.float64()),
            "count": pa.array(joined("count").astype(np.int64)),
            "x_first": pa.array(joined("x_first").astype(np.int64)),
            "x_last": pa.array(joined("x_last").astype(np.int64)),
        }
    )
