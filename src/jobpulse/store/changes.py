"""A count of the writes to each job, for memories of answers that stay valid until a job's data changes."""

from __future__ import annotations

import threading
from collections.abc import Iterable


class Changes:
    """Counts every write and delete of each job's data made through this store.

    Only a store that sees every write may answer versions from these counts: the embedded engine,
    whose process alone owns its data directory. Over a ClickHouse server other replicas write too,
    so ``version`` answers None and a memory must read a version from the tables instead.
    """

    def __init__(self, *, sees_every_write: bool) -> None:
        self.sees_every_write = sees_every_write
        self._counts: dict[str, int] = {}
        self._deletions: dict[str, int] = {}
        self._lock = threading.Lock()

    def version(self, jobs: Iterable[str]) -> tuple[int, ...] | None:
        """The write counts of ``jobs``: equal to an earlier answer only if none of them changed since."""
        if not self.sees_every_write:
            return None
        with self._lock:
            return tuple(self._counts.get(job, 0) for job in jobs)

    def note(self, jobs: Iterable[str], *, deleted: bool = False) -> None:
        """Call once the write to ``jobs`` is done (or has failed part way): a reader that took the version
        before it then misses, and one that takes it after reads what was written. ``deleted``: the write
        removed data (which memories that only grow, like the catalogue's extents, must read again)."""
        with self._lock:
            for job in jobs:
                self._counts[job] = self._counts.get(job, 0) + 1
                if deleted:
                    self._deletions[job] = self._deletions.get(job, 0) + 1

    def deletions(self, job: str) -> int:
        """How many deletions of ``job``'s data have ended."""
        return self._deletions.get(job, 0)
