"""Writes ingested columns, dropping rows that a resent batch already stored.

Log lines and system samples that are stored already are dropped first (``resends.py``). The system samples
stored are counted in the in-memory per-minute rollup too (``system_recent.py``).

A point's key is (job, metric, variant, worker, iter): each worker (rank) of a job reports series of its own,
so a rank's point never replaces another rank's, and everything below works per such series.

Scalars feed sums too: the writer inserts the chart rollup's blocks of each batch (``rollup.py``)
and each series' summary row (``latest.py``) itself, side by side with the points. A resent point
identical to the stored one is dropped, and a point that replaces a stored one with another value
takes the old value back out of the rollup's sums and counts in the same insert. (A bucket's min
and max may still remember a replaced value: they are an envelope, not a sum.) Where one of the three
inserts fails, the batch is taken back out of the rollup and its stored points are deleted, so that the
client's resend stores it whole; the summary, whose columns are maxima, minima and a count, cannot take
it back: it shows the batch's last point until the batch is resent (or a later one passes it). It counts
the new points of each batch: a replacement is not counted again, a resend after a failed insert is.
Events replace by key and need no care. The rollup rows inserted are merged into the in-memory coarse
blocks too (``chart_recent.py``).
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .catalogue import Catalogue
from .changes import Changes
from .chart_recent import RecentCharts
from .engine import Engine
from .latest import latest_rows
from .ranks import Series
from .resends import Resends
from .rollup import SERIES_COLUMNS, Rollup, by_series, rollup_rows
from .series import one_value, row_keys
from .system_recent import RecentSystem

_US = pa.timestamp("us")
# A batch of points holds one row per key (``_last_per_key``) and its rollup rows are summed by every
# read, so the engine need not merge rows of one insert: 100,000 points took 10-20 ms less. One insert
# is one block, which more threads only hand around: one thread stored 100,000 points in 33 ms, not 40-50.
_AS_GIVEN = {"optimize_on_insert": 0, "max_threads": 1}


@dataclass
class _NewPoints:
    """The points of a batch to insert (the last of each key, none already stored alike), each row's code
    among ``series``, and the stored points they replace with their codes."""

    table: pa.Table
    codes: np.ndarray
    series: list[Series]
    replaced: pa.Table | None = None
    replaced_codes: np.ndarray | None = None

    def rollup(self, inserted_us: int, sign: int = 1) -> Rollup:
        """Rollup rows that count the new points (``sign`` 1) and take the replaced ones out; -1 undoes that; each
        row's code among ``series``."""
        parts = [rollup_rows(self.table, self.codes, self.series, inserted_us, sign=sign)]
        if self.replaced is not None:
            parts.append(rollup_rows(self.replaced, self.replaced_codes, self.series, inserted_us, sign=-sign))
        if len(parts) == 1:
            return parts[0]
        return Rollup(pa.concat_tables([p.rows for p in parts]), np.concatenate([p.codes for p in parts]))


class Writer:
    def __init__(
        self,
        engine: Engine,
        db: str,
        changes: Changes,
        catalogue: Catalogue,
        recent: RecentSystem | None = None,
        charts: RecentCharts | None = None,
    ) -> None:
        """``recent``: the in-memory per-minute rollup the system samples written are counted in too; ``charts``: the
        in-memory coarse blocks of the chart rollup, which the points' rollup rows are merged into too."""
        self._engine = engine
        self._db = db
        self._changes = changes
        self._catalogue = catalogue
        self._recent = recent
        self._charts = charts
        self._resends = Resends(engine, db, changes)
        self._clock = threading.Lock()
        self._last_inserted = 0
        # One batch of points at a time: what a batch replaces, and the catalogue's memory of a job read
        # while a batch is written, are only right if no other batch of the same series is half written.
        self._scalars = threading.Lock()
        # One batch of system samples, and one of log lines, at a time: two batches resending the same rows must
        # not both find them new, and the in-memory rollup must count each batch the table was given, once.
        self._system = threading.Lock()
        self._logs = threading.Lock()
        self._helper: ThreadPoolExecutor | None = None
        self._tables: ThreadPoolExecutor | None = None

    def write(self, tables: dict[str, pa.Table]) -> dict[str, int]:
        """Insert each table's rows, the tables side by side; answers the rows written per table. Where one table
        fails, the others are written all the same (a resend stores only what is missing) and its error is
        raised."""
        given = {name: table for name, table in tables.items() if table.num_rows}
        # noted before any statement: replacing points changes the rollup before the insert
        jobs = {job for table in given.values() for job in pc.unique(table.column("job")).to_pylist()}
        try:
            names = list(given)
            pending = {name: self._aside(self._write_table, name, given[name]) for name in names[1:]}
            written, failed = {}, []
            for name in names:
                try:
                    written[name] = self._write_table(name, given[name]) if name == names[0] else pending[name].result()
                except Exception as exc:
                    failed.append(exc)
            if failed:
                raise failed[0]
            return written
        finally:
            self._changes.note(jobs)

    def _write_table(self, name: str, table: pa.Table) -> int:
        """Insert the rows of ``table`` into the table ``name``, those not stored yet; answers the rows inserted."""
        if name == "scalars":
            with self._scalars:
                return self._write_scalars(table)
        if name == "system":
            with self._system:
                return self._write_system(table)
        if name == "logs":
            with self._logs:
                return self._insert(name, self._resends.new_rows(name, table))
        return self._insert(name, table)

    def _insert(self, name: str, table: pa.Table) -> int:
        if table.num_rows:
            self._engine.insert(f"{self._db}.{name}", table)
        return table.num_rows

    def _write_system(self, table: pa.Table) -> int:
        """Insert the samples of ``table`` not stored yet, counted in the in-memory rollup where it keeps their job;
        answers the samples inserted."""
        table = self._resends.new_rows("system", table)
        if not table.num_rows:
            return 0
        jobs = self._begin_kept(self._recent, table, "system_1m")
        self._insert_kept(self._recent, jobs, "system", table)
        return table.num_rows

    def _insert_kept(self, recent: RecentSystem | None, jobs: list[str], name: str, rows: pa.Table) -> None:
        """Insert ``rows`` into the table ``name`` and into ``recent``'s memory of ``jobs``, or, where the insert fails,
        end that memory (some blocks may have been stored)."""
        try:
            self._engine.insert(f"{self._db}.{name}", rows)
        except BaseException:
            if recent is not None:
                recent.refuse(jobs)
            raise
        if recent is not None:
            recent.add(rows)

    def _begin_kept(self, recent: RecentSystem | RecentCharts | None, table: pa.Table, rollup: str) -> list[str]:
        """The jobs of ``table``; those ``recent`` knows nothing of yet are kept from now on if the table ``rollup``
        holds none of their rows (one small query each, once per job and process), else refused."""
        only = one_value(table.column("job"))
        jobs = [only] if only is not None else pc.unique(table.column("job")).to_pylist()
        for job in recent.unknown(jobs) if recent is not None else []:
            stored = (
                self._engine.query(
                    f"SELECT count() AS n FROM (SELECT 1 FROM {self._db}.{rollup} WHERE job = {{job:String}} LIMIT 1)",
                    {"job": job},
                )
                .column("n")[0]
                .as_py()
            )
            if stored:
                recent.refuse([job])
            else:
                recent.begin(job)
        return jobs

    def _write_scalars(self, table: pa.Table) -> int:
        """Insert the new points of ``table``, their rollup blocks and their series' summary rows, all three side by
        side; answers the points inserted. Where one of them fails, what the others stored of the batch is taken
        back (but the summary, see the module's text), so that the client's resend stores the batch whole."""
        new = self._new_scalars(table)
        table = new.table
        if not table.num_rows:
            return 0
        inserted = self._inserted_now()
        charts = self._charts
        jobs = self._begin_kept(charts, table, "scalars_rollup")
        rollup, rollup_codes = new.rollup(inserted)
        points = table.append_column("inserted", pa.array(np.full(table.num_rows, inserted)).cast(_US))
        summary = latest_rows(table, new.codes, new.series, inserted, new.replaced_codes)
        pending = {
            name: self._beside(self._engine.insert, f"{self._db}.{name}", rows, _AS_GIVEN)
            for name, rows in (("scalars_rollup", rollup), ("scalars", points), ("scalars_latest", summary))
        }
        if charts is not None:
            charts.add(rollup, rollup_codes, new.series)  # while the engine inserts; forgotten if the batch fails
        failed = {name: error for name, future in pending.items() if (error := future.exception()) is not None}
        if "scalars_latest" not in failed:
            self._catalogue.extend(summary)  # as the summary now reads, whether the points are stored or not
        if not failed:
            return table.num_rows
        if charts is not None:
            charts.refuse(jobs)  # whether the rollup is put back as it was is not known
        if "scalars_rollup" not in failed:
            self._take_back(new, inserted)
        if "scalars" not in failed:
            self._delete_points(jobs, inserted)
        raise next(iter(failed.values()))

    def close(self) -> None:
        """End the helper threads, once what they were given is done."""
        for pool in (self._tables, self._helper):
            if pool is not None:
                pool.shutdown()

    def _aside(self, call: Callable[..., int], *args: Any) -> Future:
        """``call(*args)`` on a thread of its own, for a table written beside the others of a batch (a pool apart
        from ``_beside``'s: a table waiting for its inserts must not hold a thread they need)."""
        if self._tables is None:
            self._tables = ThreadPoolExecutor(max_workers=4, thread_name_prefix="jobpulse-tables")
        return self._tables.submit(call, *args)

    def _beside(self, call: Callable[..., None], *args: Any) -> Future:
        """``call(*args)`` on one of the writer's helper threads (a batch's three inserts), while this thread goes
        on."""
        if self._helper is None:
            self._helper = ThreadPoolExecutor(max_workers=3, thread_name_prefix="jobpulse-writer")
        return self._helper.submit(call, *args)

    def _take_back(self, new: _NewPoints, inserted: int) -> None:
        """The batch ``new`` failed: take its points back out of the rollup (and the replaced ones back in)."""
        with contextlib.suppress(Exception):  # the insert's own error is the one to answer
            self._engine.insert(f"{self._db}.scalars_rollup", new.rollup(inserted, sign=-1).rows, _AS_GIVEN)

    def _delete_points(self, jobs: list[str], inserted: int) -> None:
        """The batch inserted at ``inserted`` failed, but its points were stored: they go (a point it replaced is the
        newest again)."""
        with contextlib.suppress(Exception):  # the failed insert's error is the one to answer
            self._engine.command(
                f"DELETE FROM {self._db}.scalars WHERE job IN {{jobs:Array(String)}} "
                "AND inserted = fromUnixTimestamp64Micro({at:Int64})",
                {"jobs": jobs, "at": inserted},
            )

    def _inserted_now(self) -> int:
        """The insert time of a batch in microseconds, later than every batch before it in this process.

        Set here rather than by the engine so the points and their rollup blocks carry the same one.
        (Replicas over one ClickHouse server take it from their own clocks.)
        """
        with self._clock:
            self._last_inserted = max(self._last_inserted + 1, time.time_ns() // 1000)
            return self._last_inserted

    def _new_scalars(self, table: pa.Table) -> _NewPoints:
        """What of ``table`` to insert, and what it replaces (see ``_NewPoints``)."""
        table, codes, series, first, last = _last_per_key(table)
        # Only a series whose stored iterations overlap the batch's can hold a point it resends or
        # replaces; most batches carry new points above every stored one and need no lookup.
        ranges = self._catalogue.ranges(series)
        overlapping = [
            i
            for i, key in enumerate(series)
            if key in ranges and ranges[key][0] <= last[i] and first[i] <= ranges[key][1]
        ]
        if not overlapping:
            return _NewPoints(table, codes, series)
        # Without FINAL (which cost ~40 ms per batch even when nothing matched): older versions of a
        # point come first, so the newest one is what ``old`` keeps below.
        stored = self._engine.query(
            f"""SELECT job, metric, variant, worker, iter, value, toUnixTimestamp64Milli(ts) AS ts
            FROM {self._db}.scalars
            WHERE (job, metric, variant, worker) IN {{series:Array(Tuple(String, String, String, String))}}
                AND iter BETWEEN {{lo:Int64}} AND {{hi:Int64}}
            ORDER BY inserted""",
            {
                "series": [series[i] for i in overlapping],
                "lo": int(min(first[i] for i in overlapping)),
                "hi": int(max(last[i] for i in overlapping)),
            },
        )
        if stored.num_rows == 0:
            return _NewPoints(table, codes, series)
        names = (*SERIES_COLUMNS, "iter")
        old = {
            row[:-2]: row[-2:]
            for row in zip(*(stored.column(c).to_pylist() for c in (*names, "value", "ts")), strict=True)
        }
        keep = np.ones(table.num_rows, dtype=bool)
        replaced: list[tuple[int, int, float, int]] = []  # code, iter, stored value, stored ts
        columns = [table.column(c).to_pylist() for c in (*names, "value")]
        ts_ms = pc.cast(table.column("ts"), pa.int64()).to_pylist()
        for i, (key, value, ts) in enumerate(zip(zip(*columns[:-1], strict=True), columns[-1], ts_ms, strict=True)):
            found = old.get(key)
            if found is None:
                continue
            same_value = found[0] == value or (found[0] != found[0] and value != value)
            if same_value and found[1] == ts:
                keep[i] = False
            else:
                replaced.append((int(codes[i]), key[-1], found[0], found[1]))
        if not keep.all():
            table, codes = table.filter(pa.array(keep)), codes[keep]
        if not replaced:
            return _NewPoints(table, codes, series)
        code_col, iter_col, value_col, ts_col = zip(*replaced, strict=True)
        old_points = pa.table(
            {
                "iter": pa.array(iter_col, pa.int64()),
                "ts": pa.array(ts_col, pa.int64()).cast(pa.timestamp("ms")),
                "value": pa.array(value_col, pa.float64()),
            }
        )
        return _NewPoints(table, codes, series, old_points, np.array(code_col, dtype=np.int64))


def _last_per_key(
    table: pa.Table,
) -> tuple[pa.Table, np.ndarray, list[Series], np.ndarray, np.ndarray]:
    """Keep only the last row of each (job, metric, variant, worker, iter) within one batch, in the table's key order;
    answers the table, the series code of each of its rows, the series (job, metric, variant, worker) each code names
    (in key order too), and each series' first and last iteration.

    Rows in key order are what the engine stores: JSON lines interleave the series step by step, and 100,000
    such points took 37 ms to insert as sent against 24 ms in order (putting them in order here: 4-6 ms).
    """
    codes, series = _in_key_order(*_series_of_rows(table))
    iters = table.column("iter").to_numpy()
    order = by_series(codes)  # rows of a series in batch order
    codes_sorted, iters_sorted = codes[order], iters[order]
    same = codes_sorted[1:] == codes_sorted[:-1]
    if not np.all(iters_sorted[1:][same] > iters_sorted[:-1][same]):
        # a series' iterations do not strictly increase: order by (series, iter, row), keep each key's last row
        order = np.lexsort((np.arange(len(codes)), iters, codes))
        codes_sorted, iters_sorted = codes[order], iters[order]
        last_of_key = np.ones(len(order), dtype=bool)
        last_of_key[:-1] = (codes_sorted[1:] != codes_sorted[:-1]) | (iters_sorted[1:] != iters_sorted[:-1])
        order, codes_sorted, iters_sorted = order[last_of_key], codes_sorted[last_of_key], iters_sorted[last_of_key]
    if not np.array_equal(order, np.arange(table.num_rows)):
        table = table.take(pa.array(order))
    starts = np.flatnonzero(np.concatenate(([True], codes_sorted[1:] != codes_sorted[:-1])))
    first = np.minimum.reduceat(iters_sorted, starts)
    last = np.maximum.reduceat(iters_sorted, starts)
    return table, codes_sorted, series, first, last  # every code keeps a row, in code order


def _in_key_order(codes: np.ndarray, series: list[Series]) -> tuple[np.ndarray, list[Series]]:
    """The codes renumbered so that their order is the series' order (the engine's order of their keys)."""
    ranked = sorted(range(len(series)), key=series.__getitem__)
    if ranked == list(range(len(series))):
        return codes, series
    rank = np.empty(len(series), dtype=np.int64)
    rank[ranked] = np.arange(len(series))
    return rank[codes], [series[i] for i in ranked]


def _series_of_rows(table: pa.Table) -> tuple[np.ndarray, list[Series]]:
    """A code per row naming its (job, metric, variant, worker), and the series each code names."""
    return row_keys(table, SERIES_COLUMNS)  # type: ignore[return-value]
