"""Writes ingested columns, dropping rows that a resent batch already stored.

Tables whose materialized views sum (log sizes, per-minute system rollups) must not see a
resent row twice, so before inserting logs and system samples the writer looks up the
keys already stored in the batch's time range of each job and keeps only the new rows.
Other tables replace by key and need no such care.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .engine import Engine

# table -> columns that, with job and ts, identify a row
_IDENTITY = {"logs": ("worker", "seq"), "system": ("worker", "metric", "device")}


class Writer:
    def __init__(self, engine: Engine, db: str) -> None:
        self._engine = engine
        self._db = db

    def write(self, tables: dict[str, pa.Table]) -> dict[str, int]:
        """Insert each table's rows; answers the rows written per table."""
        written: dict[str, int] = {}
        for name, table in tables.items():
            if table.num_rows == 0:
                continue
            if name in _IDENTITY:
                table = self._new_rows(name, table)
            if table.num_rows:
                self._engine.insert(f"{self._db}.{name}", table)
            written[name] = table.num_rows
        return written

    def _new_rows(self, name: str, table: pa.Table) -> pa.Table:
        extra = _IDENTITY[name]
        keep = np.ones(table.num_rows, dtype=bool)
        ts_ms = pc.cast(table.column("ts"), pa.int64()).to_numpy()
        jobs = table.column("job")
        for job in pc.unique(jobs).to_pylist():
            mask = pc.equal(jobs, job).to_numpy(zero_copy_only=False)
            lo, hi = int(ts_ms[mask].min()), int(ts_ms[mask].max())
            # only the batch's own workers can hold a duplicate: other workers' rows in the same time
            # range need not be read (they made each batch's lookup grow with the job's size)
            workers = pc.unique(table.column("worker").filter(pa.array(mask))).to_pylist()
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
            columns = [ts_ms[rows].tolist()] + [
                table.column(c).take(pa.array(rows)).to_pylist() for c in extra
            ]
            for i, key in zip(rows, zip(*columns, strict=True), strict=True):
                if key in seen:
                    keep[i] = False
                else:
                    seen.add(key)
        return table if keep.all() else table.filter(pa.array(keep))
