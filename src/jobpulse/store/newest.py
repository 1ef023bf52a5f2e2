"""The newest stored row time of each worker of a job, in the tables whose rows are kept once (logs, system samples).

The writer drops the rows of a batch that are stored already (a client resends what it is not sure was stored),
which costs a lookup of the batch's time range per job, as much as the insert itself. A batch whose rows are all
newer than every row its workers stored cannot hold one of them: where every write passes through this store
(the embedded engine), the newest row time of each (table, job, worker) is kept here, read once per process and
then raised by each batch before it is inserted, so that such a batch needs no lookup. The read follows the key's
order for log lines (sorted by time within a job: the newest granules only); for system samples, sorted by metric
and device within a worker, it reads the worker's times once.

What is kept is never older than what is stored: it is raised before the insert (which may store part of a batch
and fail), and rows that go (a deletion, the raw samples' time to live) only make it newer than the table's,
which costs a lookup, never a row stored twice. Over a ClickHouse server other replicas write too: nothing is
kept and every batch is looked up.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

from .changes import Changes
from .engine import Engine

_KEPT = 200_000  # (table, job, worker) remembered at most; those raised longest ago go first
_NONE = -(2**63)  # a worker with no row stored


class Newest:
    def __init__(self, engine: Engine, db: str, changes: Changes, kept: int = _KEPT) -> None:
        self._engine = engine
        self._db = db
        self._changes = changes
        self._kept = kept
        self._lock = threading.Lock()
        self._ms: OrderedDict[tuple[str, str, str], int] = OrderedDict()

    def all_older(self, table: str, job: str, workers: list[str], than_ms: int) -> bool:
        """Whether every row of ``job``'s ``workers`` stored in ``table`` is older than ``than_ms`` (epoch ms). False
        where the store does not see every write."""
        if not self._changes.sees_every_write:
            return False
        return all(self._newest(table, job, worker) < than_ms for worker in workers)

    def raise_to(self, table: str, job: str, newest_ms: dict[str, int]) -> None:
        """Note rows up to ``newest_ms`` (per worker) of ``job`` in ``table``: call before inserting them."""
        if not self._changes.sees_every_write:
            return
        with self._lock:
            for worker, ms in newest_ms.items():
                key = (table, job, worker)
                if key in self._ms:
                    self._ms[key] = max(self._ms[key], ms)
                    self._ms.move_to_end(key)
            # a worker never read stays unknown: its stored rows may be newer than the batch

    def _newest(self, table: str, job: str, worker: str) -> int:
        key = (table, job, worker)
        with self._lock:
            if key in self._ms:
                return self._ms[key]
        found = self._engine.query(
            f"SELECT toUnixTimestamp64Milli(ts) AS ms FROM {self._db}.{table} "
            "WHERE job = {job:String} AND worker = {worker:String} ORDER BY ts DESC LIMIT 1",
            {"job": job, "worker": worker},
        ).column("ms")
        ms = found[0].as_py() if len(found) else _NONE
        with self._lock:
            ms = max(ms, self._ms.get(key, _NONE))  # raised meanwhile by a batch of this worker
            self._ms[key] = ms
            while len(self._ms) > self._kept:
                self._ms.popitem(last=False)
        return ms
