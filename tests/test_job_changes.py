"""Changes of one job made at the same time keep each other: by two replicas of the server (each with its own job
lock) and by requests that read and write a job outside the lock (the ClearML API's edits)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from jobpulse.store import Store
from jobpulse.store.job_merge import fold, merge
from jobpulse.store.job_rows import Job


class _Meanwhile:
    """A replica's engine; right after the first query containing ``marker``, ``change`` runs (as on another
    replica, between this replica's read and its write)."""

    def __init__(self, store: Store, marker: str, change: Callable[[], object]) -> None:
        self._engine, self._marker, self._change = store.jobs._engine, marker, change
        self.ran = False
        store.jobs._engine = store.jobs._workers._engine = self

    def __getattr__(self, name: str):  # noqa: ANN204
        return getattr(self._engine, name)

    def query(self, sql: str, params=None):  # noqa: ANN001, ANN201
        answer = self._engine.query(sql, params)
        if self._marker in sql and not self.ran:
            self.ran = True
            self._change()
        return answer


_JOB_READ = "jobs FINAL WHERE job IN"
_WORKERS_READ = "workers FINAL WHERE job = "


@pytest.fixture
def replicas(store: Store) -> tuple[Store, Store]:
    """Two replicas of a server sharing one database, as over a ClickHouse server."""
    return (
        Store(store.engine, store.database, sees_every_write=False),
        Store(store.engine, store.database, sees_every_write=False),
    )


def test_a_change_is_merged_key_by_key_into_what_others_changed():
    base = {"status": "created", "tags": ["a"], "config": {"lr": 1, "clearml": {"script": {}, "models": []}}}
    registration = {**base, "tags": ["a", "b"], "config": {"lr": 1, "bs": 8, "clearml": base["config"]["clearml"]}}
    edit = {**base, "config": {"lr": 1, "clearml": {"script": {"requirements": "x"}, "models": []}}}
    start = {**base, "status": "running", "tags": []}
    assert fold(base, [registration, edit, start]) == {
        "status": "running",
        "tags": ["b"],
        "config": {"lr": 1, "bs": 8, "clearml": {"script": {"requirements": "x"}, "models": []}},
    }


def test_of_two_changes_of_one_value_the_later_wins_and_removals_stay_removed():
    base = {"name": "j", "config": {"a": 1, "b": 2}}
    assert merge(base, {"name": "first", "config": {"a": 1}}, {"name": "second", "config": {"a": 1, "b": 2}}) == {
        "name": "second",
        "config": {"a": 1},
    }


def test_a_registration_on_one_replica_and_a_worker_start_on_another_keep_both(replicas):
    a, b = replicas
    a.jobs.create(Job(job="j1", project="proj", name="j1"))
    meanwhile = _Meanwhile(a, _JOB_READ, lambda: b.jobs.set_worker("j1", "worker-0", {"status": "running"}))
    a.jobs.register(Job(job="j1", project="proj", config={"lr": 0.1}, tags=["sweep"]))
    assert meanwhile.ran
    for replica in replicas:
        job = replica.jobs.get("j1")
        assert (job.status, job.config, job.tags) == ("running", {"lr": 0.1}, ["sweep"])


def test_an_edit_outside_the_job_lock_keeps_a_change_made_after_its_read(store):
    store.jobs.create(Job(job="j1", project="proj", name="j1", config={"clearml": {"script": {}}}))
    edited = store.jobs.get("j1")
    store.jobs.register(Job(job="j1", project="proj", config={"lr": 0.1}))
    edited.config["clearml"]["script"]["requirements"] = {"pip": "torch"}
    written = store.jobs.write(edited)
    expected = {"clearml": {"script": {"requirements": {"pip": "torch"}}}, "lr": 0.1}
    assert written.config == expected
    assert store.jobs.get("j1").config == expected


def test_two_replicas_ending_a_jobs_last_workers_at_once_end_the_job(replicas):
    a, b = replicas
    a.jobs.create(Job(job="j1", project="proj", name="j1"))
    for worker in ("worker-0", "worker-1"):
        a.jobs.set_worker("j1", worker, {"status": "running"})
    meanwhile = _Meanwhile(a, _WORKERS_READ, lambda: b.jobs.set_worker("j1", "worker-1", {"status": "completed"}))
    a.jobs.set_worker("j1", "worker-0", {"status": "completed"})
    assert meanwhile.ran
    assert a.jobs.get("j1").status == "completed"


def test_a_job_deleted_on_one_replica_while_another_changes_it_stays_deleted(replicas):
    a, b = replicas
    a.jobs.create(Job(job="j1", project="proj", name="j1"))
    meanwhile = _Meanwhile(a, _JOB_READ, lambda: b.jobs.delete("j1"))
    a.jobs.update("j1", {"name": "renamed"})
    assert meanwhile.ran
    assert a.jobs.get("j1") is None and b.jobs.get("j1") is None


def test_a_job_registered_again_after_its_deletion_starts_afresh(store):
    store.jobs.create(Job(job="j1", project="proj", name="old", config={"lr": 1}, tags=["old"]))
    store.jobs.delete("j1")
    job, created = store.jobs.register(Job(job="j1", project="other", name="new", config={"bs": 8}))
    assert created
    assert (job.project, job.name, job.config, job.tags) == ("other", "new", {"bs": 8}, [])
    assert store.jobs.get("j1").to_dict() == job.to_dict()


def test_a_written_job_reads_back_as_written(store):
    job, _ = store.jobs.create(Job(job="j1", project="proj", name="j1", config={"a": [1, {"b": None}]}))
    assert store.jobs.get("j1").to_dict() == job.to_dict()
    assert "read_as" not in job.to_dict()
