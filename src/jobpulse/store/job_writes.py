"""Writing jobs' states: each logged before its row, then settled with what other writers wrote meanwhile."""

from __future__ import annotations

import threading
import time
from typing import Any

import orjson

from .columns import rows_to_arrow
from .engine import Engine
from .job_merge import fold

# The version a job was read at and its state then (None: it did not exist).
ReadAs = tuple[int, dict[str, Any] | None]

_SETTLE_ROUNDS = 5


class Versions:
    """Versions of the rows of replacing tables (jobs, workers): the newest version of a key is its row."""

    def __init__(self) -> None:
        self._last = 0
        self._lock = threading.Lock()

    def next(self, after: int = 0) -> int:
        """Monotonic within the process (threads never share one), ordered by wall time across replicas, and
        above ``after`` (the version a change was read at)."""
        with self._lock:
            self._last = max(self._last + 1, time.time_ns(), after + 1)
            return self._last


class JobWrites:
    """Writes job states (a ``Job.to_dict()`` with its ``deleted`` flag) so that concurrent writers of one job,
    replicas of the server or requests outside its job lock, keep each other's changes.

    Every state is logged in ``job_writes`` before its ``jobs`` row is written, so a writer that reads the log
    after writing sees every write that its own row could have hidden. Where others wrote since the writer read
    the job, the merge of all the changes (``job_merge.fold``) is written, unless the newest state already is it.
    """

    def __init__(self, engine: Engine, db: str, versions: Versions) -> None:
        self._engine = engine
        self._db = db
        self._versions = versions

    def write(self, writes: list[tuple[str, ReadAs | None, dict[str, Any]]]) -> dict[str, tuple[int, dict[str, Any]]]:
        """Write each (job, read as, state) of ``writes`` (one per job); answers each job's version and state now."""
        bases = {job_id: read_as or (0, None) for job_id, read_as, _ in writes}
        pending = {job_id: (self._versions.next(after=bases[job_id][0]), state) for job_id, _, state in writes}
        settled: dict[str, tuple[int, dict[str, Any]]] = {}
        for round_ in range(_SETTLE_ROUNDS):
            self._put(pending)
            if round_ == _SETTLE_ROUNDS - 1:
                break
            logged = self._logged(bases, list(pending))
            again = {}
            for job_id, (version, state) in pending.items():
                rows = logged.get(job_id, [])
                if len(rows) <= 1:  # this writer's state alone
                    settled[job_id] = (version, state)
                    continue
                states = [orjson.loads(row["state"]) for row in rows]
                merged = fold(bases[job_id][1] or {}, states)
                if merged == states[-1]:
                    settled[job_id] = (rows[-1]["version"], merged)
                else:
                    again[job_id] = (self._versions.next(after=rows[-1]["version"]), merged)
            pending = again
            if not pending:
                break
        return {**settled, **pending}

    def _logged(self, bases: dict[str, ReadAs], jobs: list[str]) -> dict[str, list[dict[str, Any]]]:
        """The states logged for ``jobs`` since each was read, oldest first."""
        rows = self._engine.query(
            f"SELECT job, version, state FROM {self._db}.job_writes "
            "WHERE job IN {jobs:Array(String)} AND version > {since:UInt64} ORDER BY job, version",
            {"jobs": jobs, "since": min(bases[job_id][0] for job_id in jobs)},
        ).to_pylist()
        logged: dict[str, list[dict[str, Any]]] = {}
        for row in rows:
            if row["version"] > bases[row["job"]][0]:
                logged.setdefault(row["job"], []).append(row)
        return logged

    def _put(self, states: dict[str, tuple[int, dict[str, Any]]]) -> None:
        log = [
            {"job": job_id, "version": version, "state": orjson.dumps(state).decode()}
            for job_id, (version, state) in states.items()
        ]
        self._engine.insert(f"{self._db}.job_writes", rows_to_arrow("job_writes", log))
        rows = [_row(state, version) for version, state in states.values()]
        self._engine.insert(f"{self._db}.jobs", rows_to_arrow("jobs", rows))


def _row(state: dict[str, Any], version: int) -> dict[str, Any]:
    """The ``jobs`` row of a job's state."""
    return {
        **state,
        "config": orjson.dumps(state["config"]).decode(),
        "instance_type": orjson.dumps(state["instance_type"]).decode(),
        "locked": int(state["locked"]),
        "version": version,
    }
