"""Jobs and their workers: registration, status transitions, listing and deletion."""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from typing import Any, TypeVar

from ..errors import BadRequest, Conflict, NotFound
from .changes import Changes
from .engine import Engine
from .identity import now_ms
from .job_rows import (
    ENDED,
    JOB_COLUMNS,
    STATUSES,
    Job,
    as_read,
    base_of,
    change_time,
    is_deleted,
    job_from_row,
)
from .job_writes import JobWrites, Versions
from .workers import Worker, Workers

DATA_TABLES = (
    "scalars",
    "scalars_latest",
    "scalars_rollup",
    "events",
    "logs",
    "log_sizes",
    "log_fields",
    "system",
    "system_1m",
    "system_1h",
    "workers",
    "insight_findings",
    "files",
    "file_chunks",
)
# What a job keeps when its reported data is deleted (a ClearML reset): its workers, and its files (a ClearML client
# deletes those itself, from the URLs the reset answers).
_KEPT_ON_RESET = ("workers", "files", "file_chunks")


_Method = TypeVar("_Method", bound=Callable[..., Any])


def _one_at_a_time(method: _Method) -> _Method:
    """A read-modify-write of jobs or workers, run one at a time in the process: rows are written whole, so two
    requests changing one job at once (a worker's status starting it, a registration adding its config) would
    otherwise each write the job as they read it. ``JobWrites`` merges such writes too (those of other replicas,
    and of edits outside the lock), at the price of a second write; in one process the lock keeps them apart."""

    @functools.wraps(method)
    def serialized(self: Jobs, *args: Any, **kwargs: Any) -> Any:
        with self._lock:
            return method(self, *args, **kwargs)

    return serialized  # type: ignore[return-value]


class Jobs:
    def __init__(self, engine: Engine, db: str, changes: Changes) -> None:
        self._engine = engine
        self._db = db
        self._changes = changes
        self._versions = Versions()
        self._writes = JobWrites(engine, db, self._versions)
        self._lock = threading.RLock()
        self._workers = Workers(engine, db, self._versions)

    # -- jobs -------------------------------------------------------------------------------------

    def get(self, job: str) -> Job | None:
        found = self._read([job]).get(job)
        return None if found is None or is_deleted(found) else found

    def require(self, job: str) -> Job:
        found = self.get(job)
        if found is None:
            raise NotFound(f"job {job!r} does not exist")
        return found

    def get_many(self, jobs: list[str]) -> dict[str, Job]:
        return {job_id: job for job_id, job in self._read(jobs).items() if not is_deleted(job)}

    def projects_of(self, jobs: list[str]) -> dict[str, str]:
        """The project of each of ``jobs`` that exists, without reading the jobs' other fields."""
        rows = self._engine.query(
            f"SELECT job, project FROM {self._db}.jobs FINAL WHERE job IN {{jobs:Array(String)}} AND deleted = 0",
            {"jobs": list(jobs)},
        )
        return dict(zip(rows.column("job").to_pylist(), rows.column("project").to_pylist(), strict=True))

    def _read(self, jobs: list[str]) -> dict[str, Job]:
        """The newest rows of ``jobs``, deleted ones included (a job written again starts from its deletion)."""
        if not jobs:
            return {}
        rows = self._engine.query(
            f"SELECT {JOB_COLUMNS} FROM {self._db}.jobs FINAL WHERE job IN {{jobs:Array(String)}}",
            {"jobs": list(jobs)},
        ).to_pylist()
        return {row["job"]: job_from_row(row) for row in rows}

    @staticmethod
    def _new(job: Job, found: Job | None) -> Job:
        """``job``, about to be written for the first time (again, where ``found`` is its deletion)."""
        job.read_as = (found.read_as[0], None) if found is not None and found.read_as else None
        return job

    def list(
        self,
        projects: list[str] | None,
        *,
        status: str | None = None,
        tag: str | None = None,
        search: str | None = None,
        limit: int = 100,
        after: tuple[int, str] | None = None,
    ) -> list[Job]:
        """Jobs newest first; ``after`` is the (created, job) of the last job of the previous page."""
        where = ["deleted = 0"]
        params: dict[str, Any] = {"limit": limit}
        if projects is not None:
            where.append("project IN {projects:Array(String)}")
            params["projects"] = projects
        if status:
            where.append("status = {status:String}")
            params["status"] = status
        if tag:
            where.append("has(tags, {tag:String})")
            params["tag"] = tag
        if search:
            where.append(
                "(positionCaseInsensitiveUTF8(name, {q:String}) > 0 "
                "OR positionCaseInsensitiveUTF8(job, {q:String}) > 0)"
            )
            params["q"] = search
        if after:
            where.append("(toUnixTimestamp64Milli(created), job) < ({ac:Int64}, {aj:String})")
            params["ac"], params["aj"] = after
        rows = self._engine.query(
            f"SELECT {JOB_COLUMNS} FROM {self._db}.jobs FINAL WHERE {' AND '.join(where)} "
            "ORDER BY created DESC, job DESC LIMIT {limit:UInt32}",
            params,
        ).to_pylist()
        return [job_from_row(row) for row in rows]

    def projects(self, projects: list[str] | None) -> list[dict[str, Any]]:
        where, params = "deleted = 0", {}
        if projects is not None:
            where += " AND project IN {projects:Array(String)}"
            params["projects"] = projects
        rows = self._engine.query(
            f"SELECT project, count() AS jobs, countIf(status = 'running') AS running, "
            f"toUnixTimestamp64Milli(max(updated)) AS updated FROM {self._db}.jobs FINAL WHERE {where} "
            "GROUP BY project ORDER BY project",
            params,
        )
        return rows.to_pylist()

    def write(self, job: Job) -> Job:
        """Store ``job`` as its newest version: what it changed since it was read (``Job.read_as``), merged with
        what others changed meanwhile (``JobWrites``); ``job`` is then the job as stored."""
        return self._write_many([job])[0]

    def _write_many(self, jobs: list[Job]) -> list[Job]:
        updated = now_ms()
        for job in jobs:
            job.updated = updated
        stored = self._writes.write([(job.job, base_of(job.read_as), {**job.to_dict(), "deleted": 0}) for job in jobs])
        for job in jobs:
            version, state = stored[job.job]
            for name, value in state.items():
                if name != "deleted":
                    setattr(job, name, value)  # objects of the stored state's own
            job.read_as = (version, as_read(state))
        return jobs

    @_one_at_a_time
    def create(self, job: Job, at: int | None = None) -> tuple[Job, bool]:
        """Register ``job`` unless it exists, as created ``at`` (else now); answers (the job, whether it was
        created)."""
        found = self._read([job.job]).get(job.job)
        if found is not None and not is_deleted(found):
            if found.project != job.project:
                raise Conflict(f"job {job.job!r} already exists in another project", field="job")
            return found, False
        self._new(job, found)
        job.created = job.created or change_time(at)
        if job.status not in STATUSES:
            raise BadRequest(f"'status' must be one of {', '.join(STATUSES)}", field="status")
        if job.status != "created" and job.started is None:
            job.started = job.created
        return self.write(job), True

    @_one_at_a_time
    def register(self, job: Job, at: int | None = None) -> tuple[Job, bool]:
        """``create``, and for a job that exists, what this registration adds to it: its config keys (replacing
        those given again), its tags, its name where the job still has only its id as name, and its instance type
        where the job has none (the agent registers the job with its worker's hardware). Every worker of
        a job registers it, and a wrapper such as ``jobpulse run`` may do so before the training code's
        ``jobpulse.init`` says the config; whoever comes first, the job ends up with all of it."""
        found, created = self.create(job, at)
        if created:
            return found, True
        changed = False
        config = {**found.config, **job.config}
        if config != found.config:
            found.config, changed = config, True
        tags = found.tags + [t for t in job.tags if t not in found.tags]
        if tags != found.tags:
            found.tags, changed = tags, True
        if job.name and job.name != job.job and found.name == found.job:
            found.name, changed = job.name, True
        if job.instance_type and not found.instance_type:
            found.instance_type, changed = job.instance_type, True
        return (self.write(found) if changed else found), False

    def ensure(self, jobs: dict[str, str], first_seen_ms: dict[str, int]) -> None:
        """Create the jobs of ``jobs`` (job -> project) not seen before and start the created ones. They are read
        again here, under the lock: a registration may have come between the caller's read and this write."""
        if not jobs:
            return  # most ingest requests: their jobs are known, and the lock is not taken
        with self._lock:
            existing = self._read(list(jobs))
            writes = []
            for job_id, project in jobs.items():
                found = existing.get(job_id)
                if found is None or is_deleted(found):
                    start = first_seen_ms.get(job_id) or now_ms()
                    new = Job(job=job_id, project=project, name=job_id, status="running", created=now_ms())
                    new.started = start
                    writes.append(self._new(new, found))
                elif found.status == "created":
                    found.status = "running"
                    found.started = found.started or first_seen_ms.get(job_id) or now_ms()
                    writes.append(found)
            if writes:
                self._write_many(writes)

    @_one_at_a_time
    def update(self, job_id: str, changes: dict[str, Any], at: int | None = None) -> Job:
        """Apply ``changes``; a status change is timed ``at`` (else now)."""
        job = self.require(job_id)
        for name, value in changes.items():
            if name == "status":
                self._transition(job, value, at)
            else:
                setattr(job, name, value)
        return self.write(job)

    def _transition(self, job: Job, status: str, at: int | None = None) -> None:
        if status not in STATUSES:
            raise BadRequest(f"'status' must be one of {', '.join(STATUSES)}, got {status!r}", field="status")
        if status == job.status:
            return
        if status == "created":
            raise Conflict(f"job {job.job!r} is {job.status}; it cannot go back to created", field="status")
        when = change_time(at)
        if status == "running":
            job.ended = None
            job.started = job.started or when
        else:
            job.started = job.started or when
            job.ended = when
        job.status = status

    def delete(self, job_id: str) -> None:
        """Delete a job and every row of its data. Only the job's own row is written under the lock: deleting the
        data can take long, and the changes of other jobs (every ingest of a new job) must not wait for it."""
        job = self.require(job_id)
        try:
            for table in DATA_TABLES:
                self._engine.command(f"DELETE FROM {self._db}.{table} WHERE job = {{job:String}}", {"job": job_id})
        finally:
            self._changes.note([job_id], deleted=True)
        state = {**job.to_dict(), "config": {}, "instance_type": {}, "locked": False, "deleted": 1}
        with self._lock:  # its version too, so that a change made meanwhile cannot come after the deletion
            state["updated"] = now_ms()
            self._writes.write([(job_id, base_of(job.read_as), state)])

    # -- workers ----------------------------------------------------------------------------------

    def workers(self, job: str) -> list[Worker]:
        return self._workers.read(job)

    def worker_counts(self, jobs: list[str]) -> dict[str, int]:
        """How many workers each of ``jobs`` has."""
        return self._workers.counts(jobs)

    def ensure_workers(self, pairs: set[tuple[str, str]], first_seen_ms: dict[str, int]) -> None:
        """Register the (job, worker) ``pairs`` not stored yet as running (``Workers.ensure``)."""
        self._workers.ensure(pairs, first_seen_ms)

    @_one_at_a_time
    def set_worker(self, job_id: str, worker: str, changes: dict[str, Any], at: int | None = None) -> Worker:
        """Register ``worker`` or change it; its start (when new) and end are timed ``at`` (else now)."""
        job = self.require(job_id)
        when = change_time(at)
        found = next((w for w in self.workers(job_id) if w.worker == worker), None)
        found = found or Worker(job=job_id, worker=worker, status="running", started=when)
        status = changes.get("status", found.status)
        if status not in STATUSES:
            raise BadRequest(f"'status' must be one of {', '.join(STATUSES)}, got {status!r}", field="status")
        for name, value in changes.items():
            setattr(found, name, value)
        if status in ENDED:
            found.ended = found.ended or when
        else:
            found.ended = None
        self._workers.write([found])
        # the workers read after this write: of two workers ending at once on two replicas, the later reader
        # sees both ended and ends the job
        self._follow_workers(job, self.workers(job_id), when)
        return found

    def _follow_workers(self, job: Job, workers: list[Worker], at: int) -> None:
        """Start a created job when a worker runs; end it when all its workers have ended."""
        statuses = [w.status for w in workers]
        if any(s not in ENDED for s in statuses):
            if job.status == "created" or job.status in ENDED:
                self._transition(job, "running", at)
                self.write(job)
            return
        final = "failed" if "failed" in statuses else "stopped" if "stopped" in statuses else "completed"
        if job.status != final:
            failed = [w for w in workers if w.status == "failed"]
            if failed and not job.error_message:
                first = failed[0]
                job.error_message = f"{first.worker} failed" + (
                    f" with exit code {first.exit_code}" if first.exit_code is not None else ""
                )
            self._transition(job, final, max(w.ended or at for w in workers))  # the job ends with its last worker
            self.write(job)

    def delete_data(self, job_id: str) -> None:
        """Delete every reported row of a job (scalars, events, logs, system metrics); the job and its
        workers stay."""
        try:
            for table in DATA_TABLES:
                if table not in _KEPT_ON_RESET:
                    self._engine.command(f"DELETE FROM {self._db}.{table} WHERE job = {{job:String}}", {"job": job_id})
        finally:
            self._changes.note([job_id], deleted=True)
