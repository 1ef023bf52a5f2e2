"""System metrics: catalogue and series, raw and from per-minute rollups."""

from __future__ import annotations

from datetime import UTC

from helpers import T0, ingest_samples


def test_catalog_lists_workers_metrics_and_devices(client):
    ingest_samples(client, "worker-0", "gpu_util", "0", [1.0])
    ingest_samples(client, "worker-0", "gpu_util", "1", [1.0])
    ingest_samples(client, "worker-1", "cpu_cores", "", [2.0])
    catalog = client.get("/jp/v1/jobs/j1/system").json()
    assert [(s["worker"], s["metric"], s["devices"]) for s in catalog["series"]] == [
        ("worker-0", "gpu_util", ["0", "1"]),
        ("worker-1", "cpu_cores", [""]),
    ]
    assert catalog["range"] == [T0, T0]


def test_minute_series_from_rollups_equal_raw_series(client):
    values = [float(i) for i in range(18)]  # 3 minutes at 10 s
    ingest_samples(client, "worker-0", "gpu_util", "0", values)
    params = {"metric": "gpu_util", "start": T0, "end": T0 + 179_999}
    rollup = client.get("/jp/v1/jobs/j1/system/series", params={**params, "step": "1m"}).json()["series"][0]
    raw = client.get("/jp/v1/jobs/j1/system/series", params={**params, "step": "30s"}).json()["series"][0]
    assert rollup["t"] == [T0, T0 + 60_000, T0 + 120_000]
    assert rollup["avg"] == [2.5, 8.5, 14.5] and rollup["min"] == [0.0, 6.0, 12.0]
    assert rollup["max"] == [5.0, 11.0, 17.0] and rollup["last"] == [5.0, 11.0, 17.0]
    assert rollup["count"] == [6, 6, 6]
    assert raw["avg"] == [1.0, 4.0, 7.0, 10.0, 13.0, 16.0]


def test_series_filters_workers_and_devices(client):
    ingest_samples(client, "worker-0", "gpu_util", "0", [10.0])
    ingest_samples(client, "worker-0", "gpu_util", "1", [20.0])
    ingest_samples(client, "worker-1", "gpu_util", "0", [30.0])
    answer = client.get(
        "/jp/v1/jobs/j1/system/series", params={"metric": "gpu_util", "worker": "worker-0", "device": "1"}
    ).json()
    assert [(s["worker"], s["device"], s["avg"]) for s in answer["series"]] == [("worker-0", "1", [20.0])]
    everything = client.get("/jp/v1/jobs/j1/system/series", params={"metric": "gpu_util"}).json()
    assert len(everything["series"]) == 3


def test_series_answer_only_the_bucket_fields_asked_for(client):
    ingest_samples(client, "worker-0", "gpu_util", "0", [float(i) for i in range(18)])
    params = {"metric": "gpu_util", "start": T0, "end": T0 + 179_999, "step": "1m"}
    whole = client.get("/jp/v1/jobs/j1/system/series", params=params).json()["series"][0]
    means = client.get("/jp/v1/jobs/j1/system/series", params={**params, "fields": "avg"}).json()["series"][0]
    assert means == {k: whole[k] for k in ("worker", "metric", "device", "t", "avg")}
    two = client.get("/jp/v1/jobs/j1/system/series", params={**params, "fields": "max,count"}).json()["series"][0]
    assert set(two) == {"worker", "metric", "device", "t", "max", "count"} and two["count"] == [6, 6, 6]
    again = client.get("/jp/v1/jobs/j1/system/series", params=params).json()["series"][0]
    assert again == whole  # a narrowed answer leaves the remembered series whole
    for fields in ("avg,colour", ""):
        answer = client.get("/jp/v1/jobs/j1/system/series", params={**params, "fields": fields})
        assert answer.status_code == 400 and answer.json()["error"]["field"] == "fields"


def test_default_window_and_step_cover_the_job(client):
    ingest_samples(client, "worker-0", "cpu_cores", "", [1.0] * 361)  # one hour at 10 s
    answer = client.get("/jp/v1/jobs/j1/system/series", params={"metric": "cpu_cores"}).json()
    assert answer["start"] == T0 and answer["step_ms"] == 10_000
    assert len(answer["series"][0]["t"]) == 361


def test_bad_windows_and_steps_are_400(client):
    ingest_samples(client, "worker-0", "cpu_cores", "", [1.0])
    for params, field in (
        ({"step": "0s"}, "step"),
        ({"step": "fast"}, "step"),
        ({"start": T0 + 10, "end": T0}, "start"),
        ({"start": "noon"}, "start"),
        ({"start": T0, "end": T0 + 86_400_000 * 30, "step": "1s"}, "step"),
    ):
        answer = client.get("/jp/v1/jobs/j1/system/series", params={"metric": "cpu_cores", **params})
        assert answer.status_code == 400 and answer.json()["error"]["field"] == field, params


def test_iso_times_are_accepted(client):
    ingest_samples(client, "worker-0", "cpu_cores", "", [4.0])
    from datetime import datetime

    iso = datetime.fromtimestamp(T0 / 1000, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    answer = client.get(
        "/jp/v1/jobs/j1/system/series",
        params={"metric": "cpu_cores", "start": iso, "end": T0 + 60_000, "step": "1m"},
    ).json()
    assert answer["start"] == T0 and answer["series"][0]["avg"] == [4.0]
