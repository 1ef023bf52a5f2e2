"""Findings are stored, continued, resolved and read back through the API, with the access rules of jobs."""

from __future__ import annotations

import threading

from synth import PROJECT, at, constant, evaluate, healthy, kinds, piecewise

from jobpulse.insights.evaluate import Evaluator
from jobpulse.store import Store


def idle_job(client, job: str, end: float = 40) -> None:  # noqa: ANN001
    """A job of 4 workers whose worker-0 has its GPU 1 idle from minute 10 to 30 (which makes worker-0 a straggler by
    GPU utilization too)."""
    util = lambda w, d: piecewise(90.0, (10, 30, 0.0)) if (w, d) == ("worker-0", "1") else constant(90.0)  # noqa: E731
    healthy(job, (0, end), workers=4, util=util).send(client)


def test_a_finding_opens_goes_on_and_resolves_as_one_finding(client):
    idle_job(client, "life")
    first = kinds(evaluate(client, "life", 20)["findings"], "idle_gpu")
    assert [(f["status"], f["started"]) for f in first] == [("open", at(10))]
    again = kinds(evaluate(client, "life", 26)["findings"], "idle_gpu")
    assert [(f["finding_id"], f["status"]) for f in again] == [(first[0]["finding_id"], "open")]
    assert again[0]["evidence"]["minutes"] > first[0]["evidence"]["minutes"]
    last = kinds(evaluate(client, "life", 39)["findings"], "idle_gpu")
    assert [(f["finding_id"], f["status"], f["ended"], f["resolved"]) for f in last] == [
        (first[0]["finding_id"], "resolved", at(30), at(39))
    ]
    assert last[0]["opened"] == at(20)
    later = kinds(evaluate(client, "life", 45)["findings"], "idle_gpu")  # its window sees only the episode's end
    assert later == last


def test_the_insights_of_a_job_and_its_project(client):
    idle_job(client, "listed")
    evaluate(client, "listed", 20)
    job = client.get("/jp/v1/jobs/listed/insights").json()
    assert job["open"] == 2 and sorted(f["kind"] for f in job["findings"]) == ["idle_gpu", "straggler"]
    assert client.get("/jp/v1/jobs/listed/insights", params={"status": "resolved"}).json()["findings"] == []
    project = client.get(f"/jp/v1/projects/{PROJECT}/insights", params={"status": "open", "kind": "idle_gpu"}).json()
    assert [(f["job"], f["kind"]) for f in project["findings"]] == [("listed", "idle_gpu")]
    summary = client.get("/jp/v1/insights/summary", params={"jobs": "listed,unknown"}).json()
    assert summary["jobs"] == {"listed": {"open": 2, "warning": 2}}


def test_a_bad_status_names_the_field(client):
    idle_job(client, "bad-status", end=12)
    answer = client.get("/jp/v1/jobs/bad-status/insights", params={"status": "closed"})
    assert answer.status_code == 400 and answer.json()["error"]["field"] == "status"


def test_findings_are_visible_to_keys_that_read_the_project_only(client, app, make_key):
    from starlette.testclient import TestClient

    idle_job(client, "private", end=25)
    evaluate(client, "private", 20)
    other = TestClient(app, headers={"Authorization": f"Bearer {make_key(['elsewhere'], 'admin')}"})
    assert other.get("/jp/v1/jobs/private/insights").status_code == 404
    assert other.get(f"/jp/v1/projects/{PROJECT}/insights").status_code == 403
    reader = TestClient(app, headers={"Authorization": f"Bearer {make_key([PROJECT], 'read')}"})
    assert reader.get("/jp/v1/jobs/private/insights").json()["open"] == 2
    assert reader.post("/jp/v1/jobs/private/insights/evaluate").status_code == 403


def test_a_finished_job_is_evaluated_over_its_whole_run_and_closed(client):
    idle_job(client, "finished", end=25)
    evaluate(client, "finished", 20)
    answer = client.patch("/jp/v1/jobs/finished", json={"status": "completed", "at": at(25)})
    assert answer.status_code == 200
    answer = client.post("/jp/v1/jobs/finished/insights/evaluate")
    assert answer.status_code == 200 and answer.json()["evaluated_at"] == at(25)
    found = kinds(answer.json()["findings"], "idle_gpu")
    assert [(f["status"], f["started"], f["ended"]) for f in found] == [("resolved", at(10), at(25))]


def test_two_replicas_evaluating_one_job_at_once_open_one_finding(client, store, embedded_engine):
    idle_job(client, "raced", end=25)
    replicas = [Store(embedded_engine, store.database, sees_every_write=False) for _ in range(2)]
    row = store.insight_data.jobs(["raced"])[0]
    barrier = threading.Barrier(2)
    opened: list[int] = []

    def evaluate_as(replica: Store) -> None:
        read = replica.findings.current

        def read_then_wait(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202 - both read "nothing stored" first
            found = read(*args, **kwargs)
            barrier.wait()
            return found

        replica.findings.current = read_then_wait
        opened.append(len(Evaluator(replica).job(row, at(20)).opened))

    threads = [threading.Thread(target=evaluate_as, args=(replica,)) for replica in replicas]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sum(opened) == 2  # each finding opened by one of the replicas (whichever claimed it first)
    assert sorted(f.kind for f in store.findings.of_job("raced")) == ["idle_gpu", "straggler"]
