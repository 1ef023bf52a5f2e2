"""Each scalar series' stored extent (first and last iteration and time), remembered per job.

A series is (job, metric, variant, worker): each worker (rank) of a job reports series of its own.

The writer needs a series' stored iterations to tell new points from resent or replacing ones, and a
chart needs the extent of the series it draws. Both are the series' summary rows (``scalars_latest``);
where every write passes through this store (the embedded engine), the summary of the jobs it writes is
also kept here: read once per job, then extended by each batch's summary rows as they are inserted. A
chart of a job just written then costs one query (its buckets) instead of two.

A job's memory is complete or absent, never partial: it is read whole (every series of the job), and it
is dropped when the job's data is deleted (``Changes.deletions``), so an extent answered from memory is
the one the summary would give. Over a ClickHouse server other replicas write too; nothing is kept
and every answer is read from the summary.
"""

from __future__ import annotations

import threading
from typing import Literal

import pyarrow as pa

from .changes import Changes
from .engine import Engine
from .ranks import Extent, Series, extent_of

Name = tuple[str, str, str]  # metric, variant, worker: a series within its job
_REMEMBERED_SERIES = 200_000


class Catalogue:
    def __init__(self, engine: Engine, db: str, changes: Changes) -> None:
        self._engine = engine
        self._db = db
        self._changes = changes
        self._lock = threading.Lock()
        # job -> (its deletions when read, (metric, variant, worker) -> extent)
        self._jobs: dict[str, tuple[int, dict[Name, Extent]]] = {}
        self._series = 0

    def ranges(self, series: list[Series]) -> dict[Series, tuple[int, int]]:
        """The stored iteration range of each of ``series`` that holds points."""
        if not self._changes.sees_every_write:
            rows = self._engine.query(
                f"""SELECT job, metric, variant, worker, min(first_iter) AS lo, max(last_iter) AS hi
                FROM {self._db}.scalars_latest
                WHERE (job, metric, variant, worker) IN {{series:Array(Tuple(String, String, String, String))}}
                GROUP BY job, metric, variant, worker""",
                {"series": series},
            ).to_pylist()
            return {(r["job"], r["metric"], r["variant"], r["worker"]): (r["lo"], r["hi"]) for r in rows}
        jobs = self._known({job for job, *_ in series})
        found = {}
        for job, *name in series:
            extent = jobs[job].get(tuple(name))
            if extent is not None:
                found[(job, *name)] = (extent[0], extent[1])
        return found

    def extend(self, summary: pa.Table) -> None:
        """Widen the remembered extents by a batch's summary rows (one per series), once they are stored."""
        if not self._changes.sees_every_write or summary.num_rows == 0:
            return
        names = ("job", "metric", "variant", "worker", "first_iter", "last_iter")
        columns = [summary.column(name).to_pylist() for name in names]
        ts = [summary.column(name).cast(pa.int64()).to_pylist() for name in ("first_ts", "last_ts")]
        with self._lock:
            for job, metric, variant, worker, i0, i1, t0, t1 in zip(*columns, *ts, strict=True):
                kept = self._jobs.get(job)
                if kept is None:
                    continue  # not read (or forgotten) since: the next batch reads it whole
                if kept[0] != self._changes.deletions(job):
                    self._forget(job)
                    continue
                extent = kept[1].get((metric, variant, worker))
                if extent is None:
                    kept[1][(metric, variant, worker)] = [i0, i1, t0, t1]
                    self._series += 1
                else:
                    extent[:] = [min(extent[0], i0), max(extent[1], i1), min(extent[2], t0), max(extent[3], t1)]

    def extent(
        self, jobs: list[str], metric: str, variants: list[str] | None, axis: Literal["iter", "time"]
    ) -> tuple[tuple[int, int] | None] | None:
        """The x extent of ``metric`` (its ``variants``, else all; every worker) over ``jobs`` as ``(extent,)``
        where this store remembers every one of the jobs (``extent`` None: no points), else None."""
        found = self.series(jobs, metric, variants)
        return None if found is None else (extent_of(found, set(found), axis),)

    def series(self, jobs: list[str], metric: str | None, variants: list[str] | None) -> dict[Series, Extent] | None:
        """The extent of every series (per worker) of ``metric`` (any metric: None) and its ``variants`` (else all)
        over ``jobs``, where this store remembers every one of the jobs; else None."""
        if not self._changes.sees_every_write:
            return None
        found: dict[Series, Extent] = {}
        with self._lock:
            for job in jobs:
                kept = self._jobs.get(job)
                if kept is None or kept[0] != self._changes.deletions(job):
                    return None
                for (m, variant, worker), extent in kept[1].items():
                    if (metric is None or m == metric) and (variants is None or variant in variants):
                        found[(job, m, variant, worker)] = list(extent)
        return found

    def _known(self, jobs: set[str]) -> dict[str, dict[Name, Extent]]:
        """The remembered series of each of ``jobs``, reading those not remembered (one query for all)."""
        with self._lock:
            kept = {job: self._jobs.get(job) for job in jobs}
            stale = {job for job, entry in kept.items() if entry is None or entry[0] != self._changes.deletions(job)}
            if not stale:
                return {job: entry[1] for job, entry in kept.items()}
            # taken before the read: a deletion that ends while it runs makes this memory stale, not wrong
            deletions = {job: self._changes.deletions(job) for job in stale}
        rows = self._engine.query(
            f"""SELECT job, metric, variant, worker, min(first_iter) AS i0, max(last_iter) AS i1,
                toUnixTimestamp64Milli(min(first_ts)) AS t0, toUnixTimestamp64Milli(max(last_ts)) AS t1
            FROM {self._db}.scalars_latest WHERE job IN {{jobs:Array(String)}}
            GROUP BY job, metric, variant, worker""",
            {"jobs": sorted(stale)},
        ).to_pylist()
        read: dict[str, dict[Name, Extent]] = {job: {} for job in stale}
        for r in rows:
            read[r["job"]][(r["metric"], r["variant"], r["worker"])] = [r["i0"], r["i1"], r["t0"], r["t1"]]
        with self._lock:
            if self._series + len(rows) > _REMEMBERED_SERIES:
                self._jobs.clear()
                self._series = 0
            for job in stale:
                self._forget(job)
                self._jobs[job] = (deletions[job], read[job])
                self._series += len(read[job])
        return {job: read[job] if job in stale else kept[job][1] for job in jobs}

    def _forget(self, job: str) -> None:
        dropped = self._jobs.pop(job, None)
        if dropped is not None:
            self._series -= len(dropped[1])
