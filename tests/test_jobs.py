"""Projects, jobs and workers through the native API."""

from __future__ import annotations

import dataclasses

import pytest

from helpers import T0, CountingEngine, post_columns, scalar_series
from jobpulse.store.identity import now_ms


def make_job(client, job: str, project: str = "proj", **fields) -> dict:
    answer = client.post("/jp/v1/jobs", json={"project": project, "job": job, **fields})
    assert answer.status_code in (200, 201), answer.text
    return answer.json()["job"]


def test_create_is_idempotent(client):
    first = client.post("/jp/v1/jobs", json={"project": "proj", "job": "j1", "name": "first"})
    again = client.post("/jp/v1/jobs", json={"project": "proj", "job": "j1", "name": "second"})
    assert first.status_code == 201 and first.json()["created"] is True
    assert again.status_code == 200 and again.json()["created"] is False
    assert again.json()["job"]["name"] == "first"


def test_registering_an_existing_job_adds_its_config_keys_tags_and_name(client):
    client.post("/jp/v1/jobs", json={"project": "proj", "job": "j1", "config": {"a": 1, "b": 1}, "tags": ["x"]})
    again = client.post(
        "/jp/v1/jobs",
        json={"project": "proj", "job": "j1", "name": "nice", "config": {"b": 2, "c": 3}, "tags": ["y", "x"]},
    )
    job = again.json()["job"]
    assert again.status_code == 200 and again.json()["created"] is False
    assert (job["config"], job["tags"], job["name"]) == ({"a": 1, "b": 2, "c": 3}, ["x", "y"], "nice")
    assert client.get("/jp/v1/jobs/j1").json()["job"]["config"] == {"a": 1, "b": 2, "c": 3}


def test_creating_a_job_id_used_by_another_project_is_409(client):
    make_job(client, "j1", "proj")
    answer = client.post("/jp/v1/jobs", json={"project": "other", "job": "j1"})
    assert answer.status_code == 409 and answer.json()["error"]["field"] == "job"


def test_bad_ids_are_400_naming_the_field(client):
    assert (
        client.post("/jp/v1/jobs", json={"project": "bad project!", "job": "j1"}).json()["error"]["field"] == "project"
    )
    assert client.post("/jp/v1/jobs", json={"project": "p", "job": "-x"}).json()["error"]["field"] == "job"
    assert (
        client.post("/jp/v1/jobs", json={"project": "p", "job": "j", "colour": 1}).json()["error"]["field"] == "colour"
    )


def test_list_filters_by_project_status_tag_and_search(client):
    make_job(client, "alpha-1", "proj", name="ResNet baseline", tags=["vision"])
    make_job(client, "beta-2", "proj", name="BERT finetune", tags=["nlp"])
    make_job(client, "gamma-3", "other", name="ResNet wide", tags=["vision"])
    client.patch("/jp/v1/jobs/beta-2", json={"status": "running"})

    def ids(**params):
        return sorted(j["job"] for j in client.get("/jp/v1/jobs", params=params).json()["jobs"])

    assert ids() == ["alpha-1", "beta-2", "gamma-3"]
    assert ids(project="proj") == ["alpha-1", "beta-2"]
    assert ids(status="running") == ["beta-2"]
    assert ids(tag="vision") == ["alpha-1", "gamma-3"]
    assert ids(q="resnet") == ["alpha-1", "gamma-3"]
    assert client.get("/jp/v1/jobs", params={"status": "sleeping"}).json()["error"]["field"] == "status"


def test_list_pages_with_a_cursor_without_repeats(client):
    for i in range(7):
        make_job(client, f"job-{i}")
    seen, cursor = [], None
    while True:
        params = {"limit": 3, **({"cursor": cursor} if cursor else {})}
        page = client.get("/jp/v1/jobs", params=params).json()
        seen += [j["job"] for j in page["jobs"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert sorted(seen) == [f"job-{i}" for i in range(7)] and len(seen) == 7


def test_list_carries_each_jobs_worker_count(client):
    make_job(client, "j1")
    client.put("/jp/v1/jobs/j1/workers/worker-0", json={"status": "running"})
    client.put("/jp/v1/jobs/j1/workers/worker-1", json={"status": "running"})
    make_job(client, "j2")
    counts = {j["job"]: j["workers"] for j in client.get("/jp/v1/jobs").json()["jobs"]}
    assert counts == {"j1": 2, "j2": 0}


def test_large_answers_are_gzipped_when_asked(client):
    post_columns(client, scalar_series("j1", "loss", [float(i) for i in range(5000)]))
    answer = client.get("/jp/v1/jobs/j1/scalars/points", params={"metric": "loss"}, headers={"Accept-Encoding": "gzip"})
    assert answer.headers["content-encoding"] == "gzip" and len(answer.json()["iter"]) == 5000


def test_projects_are_listed_with_counts(client):
    make_job(client, "a", "proj")
    make_job(client, "b", "proj")
    make_job(client, "c", "other")
    projects = {p["project"]: p["jobs"] for p in client.get("/jp/v1/projects").json()["projects"]}
    assert projects == {"other": 1, "proj": 2}


def test_status_transitions_set_times(client):
    make_job(client, "j1")
    running = client.patch("/jp/v1/jobs/j1", json={"status": "running"}).json()["job"]
    assert running["started"] is not None and running["ended"] is None
    done = client.patch("/jp/v1/jobs/j1", json={"status": "completed"}).json()["job"]
    assert done["status"] == "completed" and done["ended"] >= done["started"]
    back = client.patch("/jp/v1/jobs/j1", json={"status": "created"})
    assert back.status_code == 409
    bad = client.patch("/jp/v1/jobs/j1", json={"status": "paused"})
    assert bad.status_code == 400 and bad.json()["error"]["field"] == "status"


def test_a_job_ends_when_all_its_workers_end(client):
    make_job(client, "j1")
    client.put("/jp/v1/jobs/j1/workers/worker-0", json={"status": "running"})
    client.put("/jp/v1/jobs/j1/workers/worker-1", json={"status": "running"})
    assert client.get("/jp/v1/jobs/j1").json()["job"]["status"] == "running"
    client.put("/jp/v1/jobs/j1/workers/worker-0", json={"status": "completed", "exit_code": 0})
    assert client.get("/jp/v1/jobs/j1").json()["job"]["status"] == "running"
    client.put("/jp/v1/jobs/j1/workers/worker-1", json={"status": "failed", "exit_code": 3})
    job = client.get("/jp/v1/jobs/j1").json()
    assert job["job"]["status"] == "failed"
    assert job["job"]["error_message"] == "worker-1 failed with exit code 3"
    assert {w["worker"]: w["exit_code"] for w in job["workers"]} == {"worker-0": 0, "worker-1": 3}


def test_changes_sent_late_keep_the_times_they_carry(client):
    t0 = now_ms() - 3_600_000  # spooled an hour ago
    assert make_job(client, "late", at=t0)["created"] == t0
    client.put("/jp/v1/jobs/late/workers/worker-0", json={"status": "running", "at": t0 + 10})
    client.put("/jp/v1/jobs/late/workers/worker-1", json={"status": "running", "at": t0 + 20})
    client.put("/jp/v1/jobs/late/workers/worker-1", json={"status": "completed", "at": t0 + 900})
    client.put("/jp/v1/jobs/late/workers/worker-0", json={"status": "completed", "at": t0 + 500})
    answer = client.get("/jp/v1/jobs/late").json()
    assert [(w["started"], w["ended"]) for w in answer["workers"]] == [(t0 + 10, t0 + 500), (t0 + 20, t0 + 900)]
    job = answer["job"]
    assert (job["status"], job["started"], job["ended"]) == ("completed", t0 + 10, t0 + 900)  # its last worker's end
    make_job(client, "late-patched", at=t0)
    client.patch("/jp/v1/jobs/late-patched", json={"status": "running", "at": t0 + 1})
    job = client.patch("/jp/v1/jobs/late-patched", json={"status": "stopped", "at": t0 + 2}).json()["job"]
    assert (job["created"], job["started"], job["ended"]) == (t0, t0 + 1, t0 + 2)


def test_a_time_ahead_of_the_servers_clock_is_taken_as_now(client):
    before = now_ms()
    worker = client.put("/jp/v1/jobs/ahead/workers/w", json={"status": "running", "at": before + 86_400_000})
    assert worker.status_code == 404  # the job must exist first
    make_job(client, "ahead", at=before + 86_400_000)
    worker = client.put("/jp/v1/jobs/ahead/workers/w", json={"status": "running", "at": before + 86_400_000})
    assert before <= worker.json()["worker"]["started"] <= now_ms()
    assert before <= client.get("/jp/v1/jobs/ahead").json()["job"]["created"] <= now_ms()


@pytest.mark.parametrize("at", ["2026-11-23T10:00:00Z", -1, 1.5, True, None])
def test_a_bad_time_is_400_naming_at_and_changes_nothing(client, at):
    make_job(client, "timed")
    before = client.get("/jp/v1/jobs/timed").json()
    for method, path, body in (
        ("post", "/jp/v1/jobs", {"project": "proj", "job": "timed", "tags": ["x"], "at": at}),
        ("patch", "/jp/v1/jobs/timed", {"status": "running", "at": at}),
        ("put", "/jp/v1/jobs/timed/workers/worker-0", {"status": "running", "at": at}),
    ):
        answer = client.request(method, path, json=body)
        assert answer.status_code == 400, (method, answer.text)
        assert answer.json()["error"]["field"] == "at" and "epoch milliseconds" in answer.json()["error"]["message"]
    assert client.get("/jp/v1/jobs/timed").json() == before


def test_update_changes_description_fields(client):
    make_job(client, "j1")
    job = client.patch(
        "/jp/v1/jobs/j1", json={"name": "renamed", "tags": ["a", "b"], "instance_type": {"gpu_count": 8}}
    ).json()["job"]
    assert (job["name"], job["tags"], job["instance_type"]) == ("renamed", ["a", "b"], {"gpu_count": 8})
    assert client.patch("/jp/v1/jobs/j1", json={"tags": "a"}).json()["error"]["field"] == "tags"


def test_delete_removes_the_job_and_all_its_data(client):
    post_columns(client, scalar_series("j1", "loss", [1.0] * 1000))
    assert client.get("/jp/v1/jobs/j1/scalars/points", params={"metric": "loss"}).status_code == 200
    post_columns(client, scalar_series("j2", "loss", [5.0]))
    client.put("/jp/v1/jobs/j1/files/a.txt", content=b"hello")
    assert client.delete("/jp/v1/jobs/j1").json() == {"deleted": "j1"}
    assert client.get("/jp/v1/jobs/j1").status_code == 404
    assert client.get("/jp/v1/jobs/j1/scalars/points", params={"metric": "loss"}).status_code == 404
    assert client.get("/jp/v1/jobs/j1/files/a.txt").status_code == 404
    assert [j["job"] for j in client.get("/jp/v1/jobs").json()["jobs"]] == ["j2"]
    # a new job with the old id starts empty, charts included
    post_columns(client, scalar_series("j1", "acc", [0.5]))
    post_columns(client, scalar_series("j1", "loss", [9.0] * 1000))
    assert [m["metric"] for m in client.get("/jp/v1/jobs/j1/scalars").json()["metrics"]] == ["acc", "loss"]
    chart = client.get("/jp/v1/jobs/j1/scalars/chart", params={"metric": "loss", "buckets": 2}).json()
    assert chart["series"][0]["mean"] == [9.0, 9.0] and sum(chart["series"][0]["count"]) == 1000
    assert client.get("/jp/v1/jobs/j2/scalars/points", params={"metric": "loss"}).json()["value"] == [5.0]


def test_storage_usage_counts_rows_per_kind(client):
    post_columns(client, scalar_series("j1", "loss", [1.0, 2.0, 3.0]))
    client.put("/jp/v1/jobs/j1/files/a.bin", content=b"x" * 100)
    usage = client.get("/jp/v1/jobs/j1/usage").json()
    assert usage["kinds"]["scalars"]["rows"] == 3 and usage["kinds"]["logs"]["rows"] == 0
    assert usage["kinds"]["scalars"]["bytes"] > 0
    assert usage["files"] == {"files": 1, "bytes": 100}


def test_files_round_trip_and_reject_unsafe_names(client):
    make_job(client, "j1")
    up = client.put("/jp/v1/jobs/j1/files/img/step-1.png", content=b"\x89PNG\r\n\x1a\ndata")
    assert up.status_code == 201 and up.json()["url"] == "/jp/v1/jobs/j1/files/img/step-1.png"
    got = client.get(up.json()["url"])
    assert got.content == b"\x89PNG\r\n\x1a\ndata" and got.headers["content-type"] == "image/png"
    assert client.put("/jp/v1/jobs/j1/files/a/../../etc", content=b"x").status_code in (400, 404)
    assert client.get("/jp/v1/jobs/j1/files/missing.png").status_code == 404


def test_the_api_is_documented_at_docs(anonymous):
    assert anonymous.get("/docs").status_code == 200
    paths = anonymous.get("/openapi.json").json()["paths"]
    for path in (
        "/jp/v1/ingest",
        "/jp/v1/jobs",
        "/jp/v1/jobs/{job}/scalars/chart",
        "/jp/v1/jobs/{job}/logs/follow",
        "/jp/v1/jobs/{job}/system/series",
        "/jp/v1/scalars/latest",
        "/jp/v1/jobs/{job}/usage",
    ):
        assert path in paths, path


def test_a_registration_and_a_worker_status_at_once_keep_both_changes(store):
    from concurrent.futures import ThreadPoolExecutor
    from threading import Barrier

    from jobpulse.store.job_rows import Job

    def at_once(together: Barrier, change, *args) -> None:  # noqa: ANN001
        together.wait()
        change(*args)

    for i in range(12):
        job_id = f"race-{i}"
        store.jobs.create(Job(job=job_id, project="proj", name=job_id))
        together = Barrier(2)
        with ThreadPoolExecutor(2) as pool:
            changes = [
                pool.submit(at_once, together, store.jobs.register, Job(job=job_id, project="proj", config={"lr": 1})),
                pool.submit(at_once, together, store.jobs.set_worker, job_id, "worker-0", {"status": "running"}),
            ]
            for done in changes:
                done.result()
        job = store.jobs.get(job_id)
        assert (job.status, job.config) == ("running", {"lr": 1}), i


class _EndsWorkerAfterRead:
    """The real engine; right after the first read of a job's workers, the worker's end is stored (as by a request
    handled beside the one that read)."""

    def __init__(self, store, job: str, worker: str) -> None:  # noqa: ANN001
        self._store, self._engine, self._job, self._worker = store, store.jobs._engine, job, worker
        self.ended = False

    def __getattr__(self, name: str):  # noqa: ANN204
        return getattr(self._engine, name)

    def query(self, sql: str, params=None):  # noqa: ANN001, ANN201
        answer = self._engine.query(sql, params)
        if "workers FINAL WHERE job IN" in sql and not self.ended:
            self.ended = True
            self._store.jobs.set_worker(self._job, self._worker, {"status": "completed", "exit_code": 0})
        return answer


def test_a_worker_ending_while_its_first_samples_register_it_stays_ended(store):
    from jobpulse.store.job_rows import Job

    store.jobs.create(Job(job="short", project="proj", name="short"))
    ending = _EndsWorkerAfterRead(store, "short", "worker-0")
    store.jobs._engine = store.jobs._workers._engine = ending
    store.jobs.ensure_workers({("short", "worker-0")}, {"short": T0})
    assert ending.ended
    [worker] = store.jobs.workers("short")
    assert (worker.status, worker.exit_code) == ("completed", 0)
    assert store.jobs.get("short").status == "completed"


def _worker_body(job: str, worker: str) -> dict:
    series = [{"kind": "system", "worker": worker, "metric": "cpu_util", "ts": [T0], "value": [50.0]}]
    return {"project": "proj", "job": job, "series": series}


def test_a_worker_seen_before_costs_no_query_on_the_next_ingest(client, store):
    assert post_columns(client, _worker_body("j1", "worker-0")).status_code == 200
    counting = CountingEngine(store.engine)
    store.jobs._engine = store.jobs._workers._engine = counting
    assert post_columns(client, _worker_body("j1", "worker-0")).status_code == 200
    assert counting.queries == 0
    assert post_columns(client, _worker_body("j1", "worker-1")).status_code == 200
    assert counting.queries == 1
    assert [w["worker"] for w in client.get("/jp/v1/jobs/j1/workers").json()["workers"]] == ["worker-0", "worker-1"]


def test_a_job_deleted_and_written_again_gets_its_workers_again(client):
    assert post_columns(client, _worker_body("j1", "worker-0")).status_code == 200
    assert client.delete("/jp/v1/jobs/j1").status_code == 200
    assert post_columns(client, _worker_body("j1", "worker-0")).status_code == 200
    assert [w["worker"] for w in client.get("/jp/v1/jobs/j1/workers").json()["workers"]] == ["worker-0"]


@pytest.mark.parametrize(("trust_seconds", "lookups"), [(60, 0), (0, 2)])  # 2: the job, then its worker
def test_over_a_shared_server_a_worker_is_trusted_for_key_cache_seconds(
    embedded_engine, store, settings, admin_token, trust_seconds, lookups
):
    from starlette.testclient import TestClient

    from jobpulse.server import create_app
    from jobpulse.store import Store

    replica = Store(embedded_engine, store.database, sees_every_write=False)
    app = create_app(replica, dataclasses.replace(settings, key_cache_seconds=trust_seconds))
    with TestClient(app, headers={"Authorization": f"Bearer {admin_token}"}) as client:
        assert post_columns(client, _worker_body("j1", "worker-0")).status_code == 200
        counting = CountingEngine(replica.engine)
        replica.jobs._engine = replica.jobs._workers._engine = counting
        assert post_columns(client, _worker_body("j1", "worker-0")).status_code == 200
        assert counting.queries == lookups
