"""GPU waste: GPU-hours idle and underused per job and per project over a period."""

from __future__ import annotations

from synth import PROJECT, at, constant, healthy, piecewise


def test_gpu_hours_idle_and_underused_of_a_job(client):
    util = lambda w, d: piecewise(90.0, (0, 30, 0.0), (30, 60, 40.0)) if (w, d) == ("worker-0", "0") else constant(90.0)  # noqa: E731
    healthy("wasteful", (0, 60), util=util).send(client)
    answer = client.get("/jp/v1/jobs/wasteful/insights/waste", params={"start": at(0), "end": at(59.5)})
    assert answer.status_code == 200, answer.text
    waste = answer.json()
    assert waste["gpu_hours"] == 4.0  # 2 workers x 2 GPUs x 1 hour
    assert waste["idle_gpu_hours"] == 0.5 and waste["underused_gpu_hours"] == 0.5
    assert waste["unused_gpu_hours"] == round((30 * 1.0 + 30 * 0.6 + 180 * 0.1) / 60, 3)


def test_gpu_waste_of_a_project_ranks_its_jobs(client):
    healthy("busy", (0, 30)).send(client)
    healthy("idle", (0, 30), util=lambda _w, _d: constant(1.0)).send(client)
    answer = client.get(f"/jp/v1/projects/{PROJECT}/insights/waste", params={"start": at(0), "end": at(29.5)})
    waste = answer.json()
    assert [j["job"] for j in waste["jobs"]] == ["idle", "busy"]
    assert waste["gpu_hours"] == 4.0 and waste["idle_gpu_hours"] == 2.0 and waste["underused_gpu_hours"] == 0.0


def test_a_period_that_ends_before_it_starts_is_refused(client):
    answer = client.get(f"/jp/v1/projects/{PROJECT}/insights/waste", params={"start": at(10), "end": at(0)})
    assert answer.status_code == 400 and answer.json()["error"]["field"] == "start"
