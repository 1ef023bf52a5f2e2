"""Charts and series asked for again are answered from memory, and only while their jobs' data is unchanged."""

from __future__ import annotations

import pytest

from helpers import T0, CountingEngine, ingest_samples, post_columns, scalar_series
from jobpulse.store import Store
from jobpulse.store.memory import Memory

CHART = "/jp/v1/jobs/j1/scalars/chart"


def _chart(client, **params):  # noqa: ANN001, ANN202
    answer = client.get(CHART, params={"metric": "loss", "buckets": 4, **params})
    assert answer.status_code == 200, answer.text
    return answer.json()


def test_a_repeated_chart_does_not_read_the_points_again(client, store):
    post_columns(client, scalar_series("j1", "loss", [float(i) for i in range(1000)]))
    counting = CountingEngine(store.engine)
    store.scalars._engine = counting
    first = _chart(client)
    reads = counting.chart_reads
    assert reads >= 1
    assert _chart(client) == first
    assert counting.chart_reads == reads


def test_a_store_that_sees_every_write_answers_a_repeated_chart_without_a_query(client, store):
    post_columns(client, scalar_series("j1", "loss", [float(i) for i in range(1000)]))
    first = _chart(client)
    counting = CountingEngine(store.engine)
    store.scalars._engine = counting
    assert _chart(client) == first
    assert _chart(client, buckets=5)["bucket_width"] == 200  # another bucket count: the extent is remembered
    assert counting.queries == 1 and counting.chart_reads == 1


def test_a_replica_reads_the_version_and_sees_another_replicas_write(client, store, embedded_engine):
    replica = Store(embedded_engine, store.database, sees_every_write=False)  # as over a shared server
    post_columns(client, scalar_series("j1", "loss", [1.0] * 100))
    assert replica.scalars.chart(["j1"], "loss", buckets=4)["series"][0]["mean"] == [1.0] * 4
    post_columns(client, scalar_series("j1", "loss", [5.0] * 25, start=25))  # written through the other store
    assert replica.scalars.chart(["j1"], "loss", buckets=4)["series"][0]["mean"] == [1.0, 5.0, 1.0, 1.0]


def test_a_replica_reads_the_versions_of_several_charts_by_one_query(client, store, embedded_engine):
    replica = Store(embedded_engine, store.database, sees_every_write=False)
    for metric in ("a", "b", "c"):
        post_columns(client, scalar_series("j1", metric, [1.0] * 100))
    asked = [("a", None, None, None), ("b", ["train"], None, None), ("c", None, 10, 49), ("none", None, None, None)]
    counting = CountingEngine(embedded_engine)
    replica.scalars._engine = counting
    charts = replica.scalars.charts(["j1"], asked, buckets=4)
    assert [c["range"] for c in charts] == [[0, 99], [0, 99], [10, 49], None]
    assert counting.queries == 2  # the versions and extents of the four, then the three charts
    post_columns(client, scalar_series("j1", "b", [3.0] * 100))  # a write the replica does not see
    again = replica.scalars.charts(["j1"], asked, buckets=4)
    assert counting.queries == 4  # the versions again, then the one chart that changed
    assert again[1]["series"][0]["mean"] == [3.0] * 4 and again[0] == charts[0] and again[2] == charts[2]
    assert replica.scalars.charts(["j1"], [], buckets=4) == [] and counting.queries == 4  # none asked: no query


def test_new_points_are_in_the_next_chart(client):
    post_columns(client, scalar_series("j1", "loss", [1.0] * 100))
    assert _chart(client)["series"][0]["count"] == [25, 25, 25, 25]
    post_columns(client, scalar_series("j1", "loss", [2.0] * 100, start=100))
    chart = _chart(client)
    assert sum(chart["series"][0]["count"]) == 200 and chart["range"] == [0, 199]


def test_a_replaced_point_is_in_the_next_chart(client):
    post_columns(client, scalar_series("j1", "loss", [1.0] * 100))
    assert _chart(client)["series"][0]["mean"] == [1.0] * 4
    post_columns(client, scalar_series("j1", "loss", [5.0] * 25, start=25))  # the second bucket's points
    assert _chart(client)["series"][0]["mean"] == [1.0, 5.0, 1.0, 1.0]


def test_data_deleted_and_sent_again_is_charted_anew(client, store):
    post_columns(client, scalar_series("j1", "loss", [1.0] * 100))
    assert _chart(client)["series"][0]["mean"] == [1.0] * 4
    store.jobs.delete_data("j1")
    post_columns(client, scalar_series("j1", "loss", [7.0] * 100))
    assert _chart(client)["series"][0]["mean"] == [7.0] * 4


def test_changing_the_answer_does_not_change_the_memory(client, store):
    post_columns(client, scalar_series("j1", "loss", [1.0] * 100))
    first = store.scalars.chart(["j1"], "loss", buckets=4)
    first["series"][0]["last"] = ["changed"]
    first["range"] = None
    again = store.scalars.chart(["j1"], "loss", buckets=4)
    assert again["range"] == [0, 99] and again["series"][0]["last"] == [1.0] * 4


def test_the_memory_keeps_the_most_recently_used_charts():
    cache = Memory(2)
    chart = {"series": []}
    cache.put(("a",), 1, chart)
    cache.put(("b",), 1, chart)
    assert cache.get(("a",), 1) is not None  # a is now the most recent
    cache.put(("c",), 1, chart)
    assert cache.get(("b",), 1) is None
    assert cache.get(("a",), 1) is not None and cache.get(("c",), 1) is not None
    assert cache.get(("a",), 2) is None  # another version of the series


def test_a_memory_of_size_zero_keeps_nothing():
    cache = Memory(0)
    cache.put(("a",), 1, {"series": []})
    assert cache.get(("a",), 1) is None


def _minute_series(client):  # noqa: ANN001, ANN202
    params = {"metric": "gpu_util", "start": T0, "end": T0 + 179_999, "step": "1m"}
    answer = client.get("/jp/v1/jobs/j1/system/series", params=params)
    assert answer.status_code == 200, answer.text
    return answer.json()["series"]


def test_a_repeated_minute_series_is_answered_from_memory_until_new_samples_arrive(client, store):
    store.system._recent = None  # the memory of answers alone: no in-memory rollup to compute them from
    ingest_samples(client, "worker-0", "gpu_util", "0", [float(i) for i in range(18)])
    first = _minute_series(client)
    counting = CountingEngine(store.engine)
    store.system._engine = counting
    assert _minute_series(client) == first and counting.queries == 0
    ingest_samples(client, "worker-0", "gpu_util", "1", [1.0] * 18)
    assert [s["device"] for s in _minute_series(client)] == ["0", "1"] and counting.queries == 1


def test_a_remembered_series_is_answered_without_a_worker_thread(client, monkeypatch):
    import jobpulse.server.routes.system as routes

    ingest_samples(client, "worker-0", "gpu_util", "0", [float(i) for i in range(18)])
    first = _minute_series(client)

    def no_thread(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        raise AssertionError("a remembered series took a worker thread")

    monkeypatch.setattr(routes, "run_in_threadpool", no_thread)
    assert _minute_series(client) == first
    other = {"metric": "gpu_util", "start": T0, "end": T0 + 119_999, "step": "1m"}  # not remembered
    with pytest.raises(AssertionError, match="worker thread"):
        client.get("/jp/v1/jobs/j1/system/series", params=other)


def test_a_deleted_jobs_series_is_not_remembered(client, store):
    ingest_samples(client, "worker-0", "gpu_util", "0", [1.0] * 18)
    assert _minute_series(client)[0]["avg"] == [1.0] * 3
    store.jobs.delete_data("j1")
    assert _minute_series(client) == []
