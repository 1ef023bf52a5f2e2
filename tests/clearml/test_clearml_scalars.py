"""Scalars and vectors through the ClearML API: histograms, raw points, latest and single values, catalogues."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from clearml_support import BASE_TS, add_batch, call, fails, new_task, ok, scalar

from helpers import CountingEngine
from jobpulse.ingest.parse import ITER_MIN


def _columns(client, task: str, metric: str, variant: str, iters: range, values: list[float], ts0: int) -> None:
    body = {
        "project": "clearml-tests",
        "job": task,
        "series": [
            {
                "kind": "scalar",
                "metric": metric,
                "variant": variant,
                "iter": list(iters),
                "ts": [ts0 + i for i in iters],
                "value": values,
            }
        ],
    }
    assert client.post("/jp/v1/ingest", json=body).status_code == 200


def test_histogram_of_100_iterations_in_10_samples_gives_decade_means(client, task):
    add_batch(client, *[scalar(task, "loss", "train", i, float(i)) for i in range(100)])
    data = ok(client, "events.scalar_metrics_iter_histogram", {"task": task, "samples": 10})
    series = data["loss"]["train"]
    assert series["name"] == "train"
    assert series["x"] == list(range(0, 100, 10))
    assert series["y"] == [i * 10 + 4.5 for i in range(10)]


def test_histogram_gives_every_point_when_there_are_no_more_than_samples(client, task):
    add_batch(client, *[scalar(task, "loss", "v", i * 1000, float(i)) for i in range(5)])
    series = ok(client, "events.scalar_metrics_iter_histogram", {"task": task, "samples": 5})["loss"]["v"]
    assert series["x"] == [0, 1000, 2000, 3000, 4000] and series["y"] == [0.0, 1.0, 2.0, 3.0, 4.0]
    every = ok(client, "events.scalar_metrics_iter_histogram", {"task": task, "samples": 0})["loss"]["v"]
    assert every["x"] == series["x"]


def test_histogram_default_is_6000_samples(client, task):
    _columns(client, task, "m", "v", range(12_000), [1.0] * 12_000, BASE_TS)
    series = ok(client, "events.scalar_metrics_iter_histogram", {"task": task})["m"]["v"]
    assert len(series["x"]) == 6000 and series["x"][:3] == [0, 2, 4] and set(series["y"]) == {1.0}


def _histogram_counting_reads(client, store, task: str, **params) -> tuple[dict, CountingEngine]:  # noqa: ANN001
    """The task's histogram, and the store's reads that answered it."""
    counting = CountingEngine(store.engine)
    store.scalars._engine = counting
    try:
        return ok(client, "events.scalar_metrics_iter_histogram", {"task": task, **params}), counting
    finally:
        store.scalars._engine = store.engine


def test_a_task_of_many_small_metrics_is_read_by_one_query_of_points(client, store, task):
    for m in range(12):
        for variant in ("train", "eval"):
            _columns(client, task, f"metric-{m:02d}", variant, range(50), [float(m)] * 50, BASE_TS)
    _columns(client, task, "long", "v", range(100), [float(i) for i in range(100)], BASE_TS)  # over samples
    data, counting = _histogram_counting_reads(client, store, task, samples=50)
    assert len(data) == 13 and data["metric-07"]["eval"]["x"] == list(range(50))
    assert set(data["metric-07"]["eval"]["y"]) == {7.0} and data["long"]["v"]["x"] == list(range(0, 100, 2))
    assert counting.chart_reads == 2  # the 24 whole series together, and the chart of the long one


def test_the_charts_of_a_tasks_long_metrics_are_read_by_one_query(client, store, task):
    for m in range(4):  # charted from their points (2 iterations a bucket)
        _columns(client, task, f"short-{m}", "v", range(100), [float(m * 1000 + i) for i in range(100)], BASE_TS)
    for m in range(3):  # charted from the rollup's blocks (at least 400 iterations a bucket)
        _columns(client, task, f"long-{m}", "v", range(20_000), [m + 0.25] * 20_000, BASE_TS)
    data, counting = _histogram_counting_reads(client, store, task, samples=50)
    assert counting.chart_reads == 1
    assert list(data) == ["long-0", "long-1", "long-2", "short-0", "short-1", "short-2", "short-3"]
    assert data["short-2"]["v"]["x"] == list(range(0, 100, 2))
    assert data["short-2"]["v"]["y"] == [2000.5 + i for i in range(0, 100, 2)]
    long = data["long-1"]["v"]
    assert 25 <= len(long["x"]) <= 50 and long["x"][0] == 0 and set(long["y"]) == {1.25}


@pytest.mark.parametrize("key", ["timestamp", "iso_time"])
def test_histogram_over_time(client, task, key):
    add_batch(client, *[scalar(task, "m", "v", i, float(i), ts=BASE_TS + i * 10) for i in range(4)])
    series = ok(client, "events.scalar_metrics_iter_histogram", {"task": task, "key": key})["m"]["v"]
    stamps = [BASE_TS + i * 10 for i in range(4)]
    if key == "iso_time":
        stamps = [datetime.fromtimestamp(s / 1000, tz=UTC).isoformat(timespec="milliseconds") for s in stamps]
    assert series["x"] == stamps and series["y"] == [0.0, 1.0, 2.0, 3.0]


def test_histogram_leaves_out_single_values_and_filters_metrics_from_2_14(client, task):
    add_batch(
        client,
        scalar(task, "loss", "a", 1, 1.0),
        scalar(task, "acc", "b", 1, 2.0),
        scalar(task, "Summary", "best", ITER_MIN, 0.9),
    )
    assert set(ok(client, "events.scalar_metrics_iter_histogram", {"task": task})) == {"loss", "acc"}
    wanted = {"task": task, "metrics": [{"metric": "acc", "variants": ["b"]}]}
    assert set(ok(client, "events.scalar_metrics_iter_histogram", wanted)) == {"acc"}
    assert set(ok(client, "events.scalar_metrics_iter_histogram", wanted, version="2.13")) == {"loss", "acc"}


def test_multi_task_histogram_shares_one_bucket_width(client):
    short, long = new_task(client, "short"), new_task(client, "long")
    _columns(client, short, "loss", "t", range(0, 50), [1.0] * 50, BASE_TS)
    _columns(client, long, "loss", "t", range(0, 1000), [2.0] * 1000, BASE_TS)
    data = ok(client, "events.multi_task_scalar_metrics_iter_histogram", {"tasks": [short, long], "samples": 100})[
        "metrics"
    ]["loss"]["t"]
    assert data[short]["name"] == "short" and data[long]["name"] == "long"
    assert data[long]["x"][:3] == [0, 10, 20] and data[short]["x"] == [0, 10, 20, 30, 40]
    assert data[short]["y"] == [1.0] * 5


def test_multi_task_histogram_accepts_at_most_100_tasks(client, task):
    fails(client, "events.multi_task_scalar_metrics_iter_histogram", {"tasks": [task] * 101}, code=400, subcode=16)
    fails(client, "events.multi_task_scalar_metrics_iter_histogram", {"tasks": [task, "0" * 32]}, code=400, subcode=101)


def test_raw_pages_every_point_with_a_cursor_and_an_exact_total(client, task):
    _columns(client, task, "m", "a", range(15_000), [float(i) for i in range(15_000)], BASE_TS)
    _columns(client, task, "m", "b", range(100), [-1.0] * 100, BASE_TS)
    body = {"task": task, "metric": {"metric": "m"}, "batch_size": 4000, "count_total": True}
    got: dict[str, list] = {"a": [], "b": []}
    data = ok(client, "events.scalar_metrics_iter_raw", body)
    assert data["total"] == 15_100
    while data["returned"]:
        for variant, points in data["variants"].items():
            assert len(points["iter"]) == len(points["y"])
            got[variant] += points["iter"]
        data = ok(
            client,
            "events.scalar_metrics_iter_raw",
            {"task": task, "metric": {"metric": "m"}, "scroll_id": data["scroll_id"]},
        )
    assert got["a"] == list(range(15_000)) and got["b"] == list(range(100))


def test_raw_of_chosen_variants_by_timestamp(client, task):
    add_batch(client, *[scalar(task, "m", v, i, float(i)) for v in ("a", "b", "c") for i in range(3)])
    body = {"task": task, "metric": {"metric": "m", "variants": ["c", "a"]}, "key": "timestamp", "batch_size": 4}
    first = ok(client, "events.scalar_metrics_iter_raw", body)
    assert first["total"] is None and first["returned"] == 4
    assert first["variants"]["a"] == {"y": [0.0, 1.0, 2.0], "timestamp": [BASE_TS, BASE_TS + 1, BASE_TS + 2]}
    second = ok(
        client,
        "events.scalar_metrics_iter_raw",
        {"task": task, "metric": {"metric": "m"}, "scroll_id": first["scroll_id"]},
    )
    assert second["variants"] == {"c": {"y": [1.0, 2.0], "timestamp": [BASE_TS + 1, BASE_TS + 2]}}
    third = ok(
        client,
        "events.scalar_metrics_iter_raw",
        {"task": task, "metric": {"metric": "m"}, "scroll_id": second["scroll_id"]},
    )
    assert third["returned"] == 0 and third["variants"] == {}


def test_raw_batch_size_is_capped_at_200000(client, task):
    _columns(client, task, "m", "v", range(200_010), [0.0] * 200_010, BASE_TS)
    data = ok(
        client, "events.scalar_metrics_iter_raw", {"task": task, "metric": {"metric": "m"}, "batch_size": 500_000}
    )
    assert data["returned"] == 200_000


def test_latest_values_include_the_mean_of_the_last_100_and_values_below_zero(client, task):
    _columns(client, task, "loss", "v", range(150), [float(-i) for i in range(150)], BASE_TS)
    add_batch(client, scalar(task, "zero", "v", 0, 0.0))
    data = ok(client, "events.get_task_latest_scalar_values", {"task": task})
    metrics = {m["name"]: m["variants"] for m in data["metrics"]}
    assert metrics["loss"] == [{"name": "v", "last_value": -149.0, "last_100_value": -sum(range(50, 150)) / 100}]
    assert metrics["zero"] == [{"name": "v", "last_value": 0.0, "last_100_value": 0.0}]
    assert data["last_iter"] == 149 and data["name"].startswith("task ") and data["status"] == "in_progress"


def test_single_value_metrics(client):
    task, other = new_task(client, "task"), new_task(client, "other")
    add_batch(
        client,
        scalar(task, "Summary", "acc", ITER_MIN, 0.93, ts=BASE_TS),
        scalar(task, "loss", "v", 0, 1.0),
        scalar(other, "Summary", "f1", ITER_MIN, 0.5, ts=BASE_TS + 1),
    )
    data = ok(client, "events.get_task_single_value_metrics", {"tasks": [task, other]})
    assert data == {
        "tasks": [
            {
                "task": task,
                "task_name": "task",
                "values": [{"metric": "Summary", "variant": "acc", "value": 0.93, "timestamp": BASE_TS}],
            },
            {
                "task": other,
                "task_name": "other",
                "values": [{"metric": "Summary", "variant": "f1", "value": 0.5, "timestamp": BASE_TS + 1}],
            },
        ]
    }


def test_scalar_metrics_and_variants_and_task_metrics(client, task):
    add_batch(
        client,
        scalar(task, "loss", "train", 0, 1.0),
        scalar(task, "loss", "val", 0, 1.0),
        scalar(task, "acc", "val", 0, 1.0),
        {"type": "plot", "task": task, "metric": "roc", "variant": "v", "iter": 0, "plot_str": "{}"},
    )
    assert ok(client, "events.get_scalar_metrics_and_variants", {"task": task})["metrics"] == {
        "acc": ["val"],
        "loss": ["train", "val"],
    }
    by_type = ok(client, "events.get_task_metrics", {"tasks": [task], "event_type": "plot"})
    assert by_type == {"metrics": [{"task": task, "metrics": ["roc"]}]}
    every = ok(client, "events.get_task_metrics", {"tasks": [task]})
    assert every["metrics"][0]["metrics"] == ["acc", "loss", "roc"]


def test_scalar_metric_data_scrolls_with_an_exact_total(client, task):
    _columns(client, task, "m", "v", range(12_000), [1.0] * 12_000, BASE_TS)
    first = ok(client, "events.get_scalar_metric_data", {"task": task, "metric": "m"})
    assert first["total"] == 12_000 and first["returned"] == 10_000
    assert first["events"][0] == {
        "timestamp": BASE_TS,
        "type": "training_stats_scalar",
        "task": task,
        "iter": 0,
        "metric": "m",
        "variant": "v",
        "value": 1.0,
    }
    second = ok(client, "events.get_scalar_metric_data", {"task": task, "metric": "m", "scroll_id": first["scroll_id"]})
    assert second["returned"] == 2000 and second["events"][-1]["iter"] == 11_999
    single = ok(client, "events.get_scalar_metric_data", {"task": task, "metric": "m", "no_scroll": True})
    assert single["scroll_id"] is None


def test_vectors(client, task):
    add_batch(
        client,
        *[
            {
                "type": "training_stats_vector",
                "task": task,
                "metric": "hist",
                "variant": "w",
                "iter": i,
                "values": [i, i + 1.5],
                "timestamp": BASE_TS,
            }
            for i in range(3)
        ],
    )
    assert ok(client, "events.get_vector_metrics_and_variants", {"task": task}) == {
        "metrics": [{"metric": "hist", "variants": ["w"]}]
    }
    data = ok(client, "events.vector_metrics_iter_histogram", {"task": task, "metric": "hist", "variant": "w"})
    assert data == {
        "metric": "hist",
        "variant": "w",
        "iterations": [0, 1, 2],
        "vectors": [[0, 1.5], [1, 2.5], [2, 3.5]],
    }


def test_model_events_is_ignored_before_2_22(client, task):
    add_batch(client, scalar(task, "m", "v", 0, 1.0))
    _, meta, data = call(
        client, "events.scalar_metrics_iter_histogram", {"task": task, "model_events": True}, version="2.20"
    )
    assert meta["endpoint"]["actual_version"] == "2.14" and data["m"]["v"]["y"] == [1.0]
