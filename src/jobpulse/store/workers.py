"""The workers of jobs: a row per worker (its status, host and place in a distributed job), read and written."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from .columns import rows_to_arrow
from .engine import Engine
from .identity import now_ms
from .job_writes import Versions


@dataclass
class Worker:
    job: str
    worker: str
    status: str = "running"
    host: str = ""
    exit_code: int | None = None
    started: int | None = None
    ended: int | None = None
    updated: int = 0
    kind: str = "process"  # WORKER_KINDS
    node: str = ""  # the node worker a rank runs on; "" for a node or a lone process
    rank: int | None = None
    local_rank: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


_WORKER_COLUMNS = """job, worker, status, host, exit_code, toUnixTimestamp64Milli(started) AS started,
    toUnixTimestamp64Milli(ended) AS ended, toUnixTimestamp64Milli(updated) AS updated, kind, node, rank, local_rank"""


class Workers:
    """The ``workers`` table of database ``db``; rows take versions from ``versions`` (the jobs' own), so that a
    status change written after a registration always wins."""

    def __init__(self, engine: Engine, db: str, versions: Versions) -> None:
        self._engine = engine
        self._db = db
        self._versions = versions

    def read(self, job: str) -> list[Worker]:
        rows = self._engine.query(
            f"SELECT {_WORKER_COLUMNS} FROM {self._db}.workers FINAL "
            "WHERE job = {job:String} AND deleted = 0 ORDER BY length(worker), worker",
            {"job": job},
        ).to_pylist()
        return [Worker(**row) for row in rows]

    def counts(self, jobs: list[str]) -> dict[str, int]:
        """How many workers each of ``jobs`` has."""
        if not jobs:
            return {}
        rows = self._engine.query(
            f"SELECT job, count() AS n FROM {self._db}.workers FINAL "
            "WHERE job IN {jobs:Array(String)} AND deleted = 0 GROUP BY job",
            {"jobs": list(jobs)},
        ).to_pylist()
        return {row["job"]: int(row["n"]) for row in rows}

    def ensure(self, pairs: set[tuple[str, str]], first_seen_ms: dict[str, int]) -> None:
        """Register the (job, worker) ``pairs`` not stored yet as running. Not under the job lock, so that requests of
        new workers arriving together stay together (their points are stored by one insert). The rows take a version
        drawn before the read: a status change stored after that read (a short worker's first samples and its end,
        arriving together) has a later version and stays the worker's state."""
        if not pairs:
            return
        version = self._versions.next()
        jobs = sorted({job for job, _ in pairs})
        rows = self._engine.query(
            f"SELECT job, worker FROM {self._db}.workers FINAL WHERE job IN {{jobs:Array(String)}} AND deleted = 0",
            {"jobs": jobs},
        ).to_pylist()
        known = {(r["job"], r["worker"]) for r in rows}
        new = [
            Worker(job=j, worker=w, status="running", started=first_seen_ms.get(j) or now_ms())
            for j, w in sorted(pairs - known)
        ]
        if new:
            self.write(new, version)

    def write(self, workers: list[Worker], version: int | None = None) -> None:
        now = now_ms()
        rows = []
        for w in workers:
            w.updated = now
            row = w.to_dict()
            row.update(deleted=0, version=version or self._versions.next())
            rows.append(row)
        self._engine.insert(f"{self._db}.workers", rows_to_arrow("workers", rows))
