"""Dropping the rows of a batch that are stored already, in the tables whose rows are kept once (logs, system samples).

Tables whose materialized views sum (log sizes, per-minute system rollups) must not see a resent row twice, so
before inserting log lines and system samples the writer looks up the keys already stored in the batch's time range
of each job and keeps only the new rows; a batch newer than every row its workers stored needs no lookup
(``newest.py``).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .changes import Changes
from .engine import Engine
from .newest import Newest
from .rollup import by_series_then_x
from .series import one_value, row_keys

# table -> columns that, with job and ts, identify a row
_IDENTITY = {"logs": ("worker", "seq"), "system": ("worker", "metric", "device")}


class Resends:
    def __init__(self, engine: Engine, db: str, changes: Changes) -> None:
        self._engine = engine
        self._db = db
        self._newest = Newest(engine, db, changes)

    def new_rows(self, name: str, table: pa.Table) -> pa.Table:
        """The rows of ``table`` whose key is neither stored nor held by an earlier row of the batch, for the table
        ``name``; call for one batch of a table at a time, and insert what it answers before the next."""
        extra = _IDENTITY[name]
        ts_ms = pc.cast(table.column("ts"), pa.int64()).to_numpy()
        keep = _first_of_each_key(table, ("job", *extra), ts_ms)
        jobs = table.column("job")
        only = one_value(jobs)
        for job in [only] if only is not None else pc.unique(jobs).to_pylist():
            mask = np.ones(len(ts_ms), dtype=bool) if only is not None else _equal(jobs, job)
            newest = _newest_per_worker(table.column("worker"), ts_ms, mask)
            # only the batch's own workers can hold a duplicate: other workers' rows in the same time
            # range need not be read (they made each batch's lookup grow with the job's size)
            workers, lo, hi = list(newest), int(ts_ms[mask].min()), int(ts_ms[mask].max())
            older = self._newest.all_older(name, job, workers, lo)
            self._newest.raise_to(name, job, newest)
            if older:
                continue  # every stored row of these workers is older than the batch
            stored = self._engine.query(
                f"SELECT toUnixTimestamp64Milli(ts) AS ts, {', '.join(extra)} FROM {self._db}.{name} "
                "WHERE job = {job:String} AND worker IN {workers:Array(String)} "
                "AND ts BETWEEN fromUnixTimestamp64Milli({lo:Int64}) AND fromUnixTimestamp64Milli({hi:Int64})",
                {"job": job, "workers": workers, "lo": lo, "hi": hi},
            )
            if stored.num_rows == 0:
                continue
            seen = set(zip(*(stored.column(c).to_pylist() for c in ("ts", *extra)), strict=True))
            rows = np.flatnonzero(mask)
            columns = [ts_ms[rows].tolist()] + [table.column(c).take(pa.array(rows)).to_pylist() for c in extra]
            for i, key in zip(rows, zip(*columns, strict=True), strict=True):
                if key in seen:
                    keep[i] = False
                else:
                    seen.add(key)
        return table if keep.all() else table.filter(pa.array(keep))


def _equal(column: pa.ChunkedArray, value: str) -> np.ndarray:
    """Which rows of ``column`` hold ``value``."""
    return pc.equal(column, value).to_numpy(zero_copy_only=False)


def _newest_per_worker(workers: pa.ChunkedArray, ts_ms: np.ndarray, mask: np.ndarray) -> dict[str, int]:
    """The newest row time (``ts_ms``) of each worker among the rows ``mask`` selects."""
    codes, names = row_keys(pa.table({"worker": workers}), ("worker",))
    newest = np.full(len(names), np.iinfo(np.int64).min, dtype=np.int64)
    np.maximum.at(newest, codes[mask], ts_ms[mask])
    return {name[0]: int(ms) for name, ms in zip(names, newest, strict=True) if ms != np.iinfo(np.int64).min}


def _first_of_each_key(table: pa.Table, names: tuple[str, ...], ts_ms: np.ndarray) -> np.ndarray:
    """Which rows are the first of their key (the columns ``names`` and ``ts_ms``) in the batch."""
    codes, _ = row_keys(table, names)
    order = by_series_then_x(codes, ts_ms)  # stable: of equal keys the earliest row comes first
    if order is None:
        order = np.arange(len(codes))
    codes, ts_ms = codes[order], ts_ms[order]
    repeated = (codes[1:] == codes[:-1]) & (ts_ms[1:] == ts_ms[:-1])
    keep = np.ones(len(codes), dtype=bool)
    keep[order[1:][repeated]] = False
    return keep
