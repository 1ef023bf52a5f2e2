"""Each worker (rank) of a job reports scalar series of its own: nothing one rank reports replaces another's point,
reads show the leader's series by default, every rank's or their envelope on request."""

from __future__ import annotations

from typing import Any

from helpers import NOW_MS, post_columns


def _ranks(job: str, values: dict[str, list[float]], *, metric: str = "loss", start: int = 0, shift: int = 0) -> dict:
    """One series of ``metric`` per worker (worker -> values, from iteration ``start``); a worker's times are
    ``shift`` ms later per rank."""
    series = []
    for rank, (worker, points) in enumerate(values.items()):
        iters = list(range(start, start + len(points)))
        series.append(
            {
                "kind": "scalar",
                "worker": worker,
                "metric": metric,
                "variant": "train",
                "iter": iters,
                "ts": [NOW_MS - 10_000_000 + i * 1000 + rank * shift for i in iters],
                "value": points,
            }
        )
    return {"project": "proj", "job": job, "series": series}


def _chart(client: Any, job: str = "j1", **params: Any) -> dict:
    answer = client.get(f"/jp/v1/jobs/{job}/scalars/chart", params={"metric": "loss", "buckets": 10, **params})
    assert answer.status_code == 200, answer.text
    return answer.json()


def _points(client: Any, job: str = "j1", **params: Any) -> dict:
    answer = client.get(f"/jp/v1/jobs/{job}/scalars/points", params={"metric": "loss", **params})
    assert answer.status_code == 200, answer.text
    return answer.json()


def test_two_workers_reporting_the_same_steps_keep_every_point(client, store):
    post_columns(client, _ranks("j1", {"worker-0": [1.0] * 50, "worker-1": [2.0] * 50}))
    assert store.scalars.count(["j1"]) == 50  # the leader's series
    table = store.engine.query(
        f"SELECT worker, count() AS n FROM {store.database}.scalars FINAL GROUP BY worker ORDER BY worker"
    )
    assert table.to_pylist() == [{"worker": "worker-0", "n": 50}, {"worker": "worker-1", "n": 50}]
    both = [s["worker"] for s in _chart(client, workers="all")["series"]]
    assert both == ["worker-0", "worker-1"]


def test_a_resend_replaces_only_its_own_workers_point(client):
    post_columns(client, _ranks("j1", {"worker-0": [1.0] * 10, "worker-1": [2.0] * 10}))
    post_columns(client, _ranks("j1", {"worker-1": [5.0] * 10}))  # worker-1 reports its steps again
    by_worker = {s["worker"]: s for s in _chart(client, workers="all")["series"]}
    assert by_worker["worker-0"]["mean"] == [1.0] * 10 and by_worker["worker-1"]["mean"] == [5.0] * 10
    assert sum(by_worker["worker-1"]["count"]) == 10  # replaced, not added
    assert _points(client, worker="worker-1")["value"] == [5.0] * 10


def test_the_rollup_takes_a_replaced_point_out_of_its_own_workers_blocks_only(client):
    values = [float(i) for i in range(2000)]
    post_columns(client, _ranks("j1", {"worker-0": values, "worker-1": [v + 1 for v in values]}))
    post_columns(client, _ranks("j1", {"worker-0": [0.0] * 2000}))
    wide = {s["worker"]: s for s in _chart(client, workers="all", buckets=2)["series"]}
    assert wide["worker-0"]["mean"] == [0.0] * len(wide["worker-0"]["x"])
    assert sum(wide["worker-1"]["count"]) == 2000 and wide["worker-1"]["mean"][0] > 1.0


def test_charts_points_and_latest_show_worker_0_by_default(client):
    post_columns(client, _ranks("j1", {"worker-1": [2.0] * 10, "worker-0": [1.0] * 10}))
    [series] = _chart(client)["series"]
    assert series["mean"] == [1.0] * 10 and "worker" not in series
    assert _points(client)["value"] == [1.0] * 10
    [row] = client.get("/jp/v1/scalars/latest", params={"jobs": "j1"}).json()["jobs"]["j1"]
    assert row["value"] == 1.0 and row["points"] == 10 and "worker" not in row


def test_the_jobs_leader_field_names_the_series_shown(client):
    post_columns(client, _ranks("j1", {"worker-0": [1.0] * 10, "worker-3": [3.0] * 10}))
    assert client.patch("/jp/v1/jobs/j1", json={"leader": "worker-3"}).status_code == 200
    assert _chart(client)["series"][0]["mean"] == [3.0] * 10
    assert client.get("/jp/v1/scalars/latest", params={"jobs": "j1"}).json()["jobs"]["j1"][0]["value"] == 3.0


def test_without_worker_0_the_first_worker_to_report_leads(client):
    post_columns(client, _ranks("j1", {"worker-2": [2.0] * 5, "worker-1": [1.0] * 5}, shift=10))
    assert _chart(client)["series"][0]["mean"] == [2.0] * 5  # its first point is 10 ms earlier


def test_a_named_worker_is_charted_instead_of_the_leader(client):
    post_columns(client, _ranks("j1", {"worker-0": [1.0] * 10, "worker-1": [2.0] * 10}))
    assert _chart(client, worker="worker-1")["series"][0]["mean"] == [2.0] * 10
    assert _chart(client, worker="worker-9")["series"] == []


def test_the_envelope_holds_min_median_and_max_across_workers_per_bucket(client):
    values = {f"worker-{r}": [float(r * 10 + i % 2) for i in range(20)] for r in range(3)}
    post_columns(client, _ranks("j1", values))
    [series] = _chart(client, workers="envelope")["series"]
    assert series["x"] == list(range(0, 20, 2))
    assert series["min"] == [0.5] * 10 and series["median"] == [10.5] * 10 and series["max"] == [20.5] * 10
    assert series["workers"] == [3] * 10


def test_the_envelope_leaves_out_a_worker_without_points_in_a_bucket(client):
    post_columns(client, _ranks("j1", {"worker-0": [1.0] * 20, "worker-1": [3.0] * 10}))
    [series] = _chart(client, workers="envelope")["series"]
    assert series["workers"] == [2] * 5 + [1] * 5 and series["median"] == [2.0] * 5 + [1.0] * 5


def test_a_wide_envelope_is_read_from_the_rollup(client):
    values = {f"worker-{r}": [float(r)] * 5000 for r in range(4)}
    post_columns(client, _ranks("j1", values))
    chart = _chart(client, workers="envelope", buckets=4)
    assert chart["bucket_width"] % 64 == 0
    [series] = chart["series"]
    assert set(series["min"]) == {0.0} and set(series["median"]) == {1.5} and set(series["max"]) == {3.0}


def test_comparing_jobs_shows_each_jobs_leader(client):
    post_columns(client, _ranks("a", {"worker-0": [1.0] * 10, "worker-1": [9.0] * 10}))
    post_columns(client, _ranks("b", {"worker-1": [2.0] * 10}))
    answer = client.get("/jp/v1/scalars/chart", params={"jobs": "a,b", "metric": "loss", "buckets": 10}).json()
    assert [(s["job"], s["mean"][0]) for s in answer["series"]] == [("a", 1.0), ("b", 2.0)]


def test_an_unknown_workers_mode_is_a_400_naming_the_field(client):
    post_columns(client, _ranks("j1", {"worker-0": [1.0]}))
    for path, params in (
        ("/jp/v1/jobs/j1/scalars/chart", {"metric": "loss", "workers": "some"}),
        ("/jp/v1/scalars/latest", {"jobs": "j1", "workers": "envelope"}),
    ):
        answer = client.get(path, params=params)
        assert answer.status_code == 400 and answer.json()["error"]["field"] == "workers", answer.text


def test_latest_answers_every_worker_or_a_named_one(client):
    post_columns(client, _ranks("j1", {"worker-0": [1.0, 4.0], "worker-1": [2.0, 6.0]}))
    rows = client.get("/jp/v1/scalars/latest", params={"jobs": "j1", "workers": "all"}).json()["jobs"]["j1"]
    assert [(r["worker"], r["value"], r["min"], r["max"]) for r in rows] == [
        ("worker-0", 4.0, 1.0, 4.0),
        ("worker-1", 6.0, 2.0, 6.0),
    ]
    [row] = client.get("/jp/v1/scalars/latest", params={"jobs": "j1", "worker": "worker-1"}).json()["jobs"]["j1"]
    assert row["worker"] == "worker-1" and row["value"] == 6.0
    posted = client.post("/jp/v1/scalars/latest", params={"workers": "all"}, json={"jobs": ["j1"]})
    assert len(posted.json()["jobs"]["j1"]) == 2


def test_the_catalogue_names_the_workers_of_each_series_and_its_leader(client):
    post_columns(client, _ranks("j1", {"worker-0": [1.0] * 4, "worker-1": [2.0] * 6}))
    post_columns(client, _ranks("j1", {"worker-1": [1.0] * 3}, metric="lr"))
    metrics = {m["metric"]: m["variants"][0] for m in client.get("/jp/v1/jobs/j1/scalars").json()["metrics"]}
    assert (metrics["loss"]["workers"], metrics["loss"]["leader"], metrics["loss"]["points"]) == (
        ["worker-0", "worker-1"],
        "worker-0",
        4,
    )
    assert (metrics["lr"]["workers"], metrics["lr"]["leader"]) == (["worker-1"], "worker-1")


def test_a_named_workers_points_page_with_a_cursor_of_their_own(client):
    post_columns(client, _ranks("j1", {"worker-0": [1.0] * 5, "worker-1": [2.0] * 5}))
    first = _points(client, worker="worker-1", limit=3)
    assert first["value"] == [2.0] * 3
    rest = _points(client, worker="worker-1", limit=3, cursor=first["next_cursor"])
    assert rest["iter"] == [3, 4] and rest["value"] == [2.0] * 2
    other = client.get(
        "/jp/v1/jobs/j1/scalars/points", params={"metric": "loss", "limit": 3, "cursor": first["next_cursor"]}
    )
    assert other.status_code == 400 and other.json()["error"]["field"] == "cursor"


def test_a_job_of_one_worker_charts_as_before(client):
    post_columns(client, _ranks("j1", {"worker-5": [float(i) for i in range(10)]}))
    chart = _chart(client)
    assert chart["series"] == [
        {
            "job": "j1",
            "variant": "train",
            "x": list(range(10)),
            "mean": [float(i) for i in range(10)],
            "min": [float(i) for i in range(10)],
            "max": [float(i) for i in range(10)],
            "last": [float(i) for i in range(10)],
            "count": [1] * 10,
            "x_first": list(range(10)),
            "x_last": list(range(10)),
        }
    ]


def test_the_reads_behind_the_compatible_apis_answer_the_leaders_series(client, store):
    post_columns(client, _ranks("j1", {"worker-0": [1.0, 2.0, 3.0], "worker-1": [10.0, 20.0, 30.0]}))
    [points] = store.scalars.points_of("j1", [("loss", "train")]).values()
    assert points["value"].tolist() == [1.0, 2.0, 3.0]
    assert [row["value"] for row in store.scalars.at_iter(["j1"], 2)] == [3.0]
    assert [(row["mean"], row["points"]) for row in store.scalars.recent_mean("j1", 2)] == [(2.5, 2)]
    stats = store.scalar_stats.of(["j1"])[("j1", "loss", "train")]
    assert (stats["mean"], stats["first_value"], stats["recent"], stats["max_iter"]) == (2.0, 1.0, 3.0, 2)
    assert store.scalars.leaders(["j1"]) == {("j1", "loss", "train"): "worker-0"}
