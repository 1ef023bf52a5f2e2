"""Which jobs one of the store's in-memory rollups keeps: those this process wrote from their first row.

The store that sees every write keeps some rollups of the jobs it writes in memory as well as in their
tables (the per-minute system rollup, ``system_recent.py``; the chart rollup's coarse blocks,
``chart_recent.py``), so that reads of them need no query. Such a memory answers for a job only if it
counted every row the table holds for it: the job must have had none stored when this process first
wrote to it, and nothing may have been taken from the table behind its back since. ``RecentJobs``, which
such a memory extends, keeps that account, the same for every one of them:

- ``unknown`` names the jobs a write must first ``begin`` (the table holds none of their rows: keep them
  from now on) or ``refuse`` (stored before this process, or a write that may have failed half way);
- a deletion of a job's data (``deletions(job)`` moves) ends its memory;
- over ``budget`` (in the memory's own unit: its ``size``), the jobs written longest ago go first.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable
from typing import Generic, Protocol, TypeVar

import pyarrow as pa
import pyarrow.compute as pc

from .series import one_value

_REFUSED_KEPT = 100_000  # jobs remembered as not kept, so that their first write is not looked up again


class KeptJob(Protocol):
    deletions: int  # the job's deletions when it began to be kept
    size: int  # what it holds, in the budget's unit


J = TypeVar("J", bound=KeptJob)


class RecentJobs(Generic[J]):
    """The jobs a memory keeps, each as made by ``make(deletions)``, within ``budget`` in all. ``lock`` guards
    them and the memory's own use of them."""

    def __init__(self, budget: int, deletions: Callable[[str], int], make: Callable[[int], J]) -> None:
        self._budget = budget
        self._deletions = deletions
        self._make = make
        self._jobs: OrderedDict[str, J] = OrderedDict()  # least recently written first
        self._refused: OrderedDict[str, None] = OrderedDict()
        self._size = 0
        self.lock = threading.Lock()

    @property
    def size(self) -> int:
        """What the kept jobs hold in all, in the budget's unit."""
        return self._size

    def unknown(self, jobs: Iterable[str]) -> list[str]:
        """Those of ``jobs`` neither kept nor refused: a write of theirs must first ``begin`` or ``refuse``."""
        with self.lock:
            return [job for job in jobs if self.current(job) is None and job not in self._refused]

    def begin(self, job: str) -> None:
        """Keep ``job`` from now on: its table holds none of its rows."""
        with self.lock:
            if self.current(job) is None and job not in self._refused:
                self._jobs[job] = self._make(self._deletions(job))

    def refuse(self, jobs: Iterable[str]) -> None:
        """Keep none of ``jobs`` in this process."""
        with self.lock:
            for job in jobs:
                self._refuse(job)
            while len(self._refused) > _REFUSED_KEPT:
                self._refused.popitem(last=False)

    def current(self, name: str) -> J | None:
        """The kept job ``name``, unless its data was deleted since (then it is no longer kept). Under ``lock``."""
        job = self._jobs.get(name)
        if job is not None and job.deletions != self._deletions(name):
            self._drop(name)
            return None
        return job

    def _written(self, name: str) -> J | None:
        """``current``, as the job written most recently. Under ``lock``."""
        job = self.current(name)
        if job is not None:
            self._jobs.move_to_end(name)
        return job

    def merge(self, rows: pa.Table, into: Callable[[J, pa.Table], None]) -> None:
        """Merge the ``rows`` of each kept job (a ``job`` column) into it, by ``into(job, its rows)``, as its latest
        write; then keep within the budget."""
        jobs = rows.column("job")
        only = one_value(jobs)  # a request of one job, as most are
        with self.lock:
            for name in [only] if only is not None else pc.unique(jobs).to_pylist():
                job = self._written(name)
                if job is None:
                    continue
                before = job.size
                into(job, rows if only is not None else rows.filter(pc.equal(jobs, name)))
                self._grown(job, before)

    def _grown(self, job: J, before: int) -> None:
        """Count what ``job`` holds now that it held ``before``; then end the memory of the jobs written longest
        ago while all hold more than the budget. Under ``lock``."""
        self._size += job.size - before
        while self._size > self._budget and self._jobs:
            self._refuse(next(iter(self._jobs)))

    def _refuse(self, name: str) -> None:
        self._drop(name)
        self._refused[name] = None
        self._refused.move_to_end(name)

    def _drop(self, name: str) -> None:
        job = self._jobs.pop(name, None)
        if job is not None:
            self._size -= job.size
