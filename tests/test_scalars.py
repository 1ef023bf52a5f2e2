"""Scalar queries: catalogue, downsampled charts, compare, full-resolution paging, latest values."""

from __future__ import annotations

import math

import pyarrow as pa
from starlette.testclient import TestClient

from helpers import NOW_MS, post_columns, post_lines, scalar_series
from jobpulse.server import create_app


def test_metrics_lists_variants_with_counts(client):
    post_columns(client, scalar_series("j1", "loss", [1.0, 2.0, 3.0], variant="train"))
    post_columns(client, scalar_series("j1", "loss", [4.0], variant="val", start=10))
    post_columns(client, scalar_series("j1", "acc", [0.1, 0.2]))
    metrics = client.get("/jp/v1/jobs/j1/scalars").json()["metrics"]
    assert [m["metric"] for m in metrics] == ["acc", "loss"]
    loss = {v["variant"]: (v["points"], v["first_iter"], v["last_iter"]) for v in metrics[1]["variants"]}
    assert loss == {"train": (3, 0, 2), "val": (1, 10, 10)}


def test_chart_buckets_carry_mean_min_max_last_and_count(client):
    values = [float(i % 10) for i in range(100)]
    values[55] = 1000.0  # a spike inside one bucket
    post_columns(client, scalar_series("j1", "loss", values))
    chart = client.get("/jp/v1/jobs/j1/scalars/chart", params={"metric": "loss", "buckets": 10}).json()
    assert chart["range"] == [0, 99] and chart["bucket_width"] == 10
    series = chart["series"][0]
    assert series["x"] == list(range(0, 100, 10))
    assert series["count"] == [10] * 10
    assert series["mean"][0] == 4.5 and series["min"][0] == 0.0 and series["last"][0] == 9.0
    assert series["max"][5] == 1000.0  # the spike stays visible after downsampling
    assert series["x_first"][5] == 50 and series["x_last"][5] == 59


def test_chart_of_a_zoomed_range_is_finer(client):
    post_columns(client, scalar_series("j1", "loss", [float(i) for i in range(1000)]))
    wide = client.get("/jp/v1/jobs/j1/scalars/chart", params={"metric": "loss", "buckets": 10}).json()
    zoom = client.get(
        "/jp/v1/jobs/j1/scalars/chart", params={"metric": "loss", "buckets": 10, "x_min": 100, "x_max": 199}
    ).json()
    assert wide["bucket_width"] >= 100 and zoom["bucket_width"] == 10
    assert zoom["series"][0]["x"][0] == 100 and zoom["series"][0]["mean"][0] == 104.5


def test_wide_buckets_from_the_rollup_equal_the_raw_points(client):
    values = [((i * 7919) % 1000) / 10.0 for i in range(50_000)]
    values[1234] = "NaN"
    post_columns(client, scalar_series("j1", "loss", values))
    chart = client.get("/jp/v1/jobs/j1/scalars/chart", params={"metric": "loss", "buckets": 20}).json()
    width, series = chart["bucket_width"], chart["series"][0]
    assert width % 64 == 0 and 2500 <= width <= 2600  # whole rollup blocks, about 20 buckets
    for b, x in enumerate(series["x"]):
        inside = [v for i, v in enumerate(values) if x <= i < x + width]
        finite = [v for v in inside if v != "NaN"]
        assert series["count"][b] == len(inside)
        assert abs(series["mean"][b] - sum(finite) / len(finite)) < 1e-9
        assert (series["min"][b], series["max"][b]) == (min(finite), max(finite))
        assert series["last"][b] == inside[-1]
        assert (series["x_first"][b], series["x_last"][b]) == (x, x + len(inside) - 1)


def test_replacing_points_keeps_rollup_buckets_exact(client):
    post_columns(client, scalar_series("j1", "loss", [1.0] * 4096))
    post_columns(client, scalar_series("j1", "loss", [1.0] * 4096))  # an identical resend
    post_columns(client, scalar_series("j1", "loss", [3.0] * 2048))  # replaces the first half
    chart = client.get("/jp/v1/jobs/j1/scalars/chart", params={"metric": "loss", "buckets": 2}).json()
    series = chart["series"][0]
    assert series["count"] == [2048, 2048] and series["mean"] == [3.0, 1.0]


def test_a_resend_of_the_newest_values_after_a_replacement_is_dropped(client):
    post_columns(client, scalar_series("j1", "loss", [1.0] * 100))
    post_columns(client, scalar_series("j1", "loss", [3.0] * 100))  # replaces every point
    post_columns(client, scalar_series("j1", "loss", [3.0] * 100))  # resends the newest values
    catalog = client.get("/jp/v1/jobs/j1/scalars").json()
    assert catalog["metrics"][0]["variants"][0]["points"] == 100  # a replaced point counts once; a resend, never
    chart = client.get("/jp/v1/jobs/j1/scalars/chart", params={"metric": "loss", "buckets": 1}).json()
    assert chart["series"][0]["count"] == [100] and chart["series"][0]["mean"] == [3.0]


def test_a_run_resumed_from_a_checkpoint_counts_each_iteration_once(client):
    post_columns(client, scalar_series("j1", "loss", [1.0] * 1000))
    post_columns(client, scalar_series("j1", "loss", [0.5] * 500, start=800))  # resumed at 800: 200 logged again
    variant = client.get("/jp/v1/jobs/j1/scalars").json()["metrics"][0]["variants"][0]
    assert (variant["points"], variant["first_iter"], variant["last_iter"]) == (1300, 0, 1299)
    points = client.get("/jp/v1/jobs/j1/scalars/points", params={"metric": "loss", "limit": 5000}).json()
    assert len(points["iter"]) == 1300


def test_replacing_more_points_than_one_statement_takes_keeps_buckets_exact(client):
    post_columns(client, scalar_series("j1", "loss", [1.0] * 25_000))
    post_columns(client, scalar_series("j1", "loss", [3.0] * 25_000))  # every point replaced, in three slices
    chart = client.get("/jp/v1/jobs/j1/scalars/chart", params={"metric": "loss", "buckets": 5}).json()
    series = chart["series"][0]
    assert sum(series["count"]) == 25_000 and series["mean"] == [3.0] * len(series["mean"])


def test_time_axis_charts_use_the_rollup_too(client):
    body = scalar_series("j1", "loss", [float(i % 3) for i in range(30_000)])
    body["series"][0]["ts"] = [NOW_MS - 40_000_000 + i * 1000 for i in range(30_000)]  # one point a second
    post_columns(client, body)
    chart = client.get("/jp/v1/jobs/j1/scalars/chart", params={"metric": "loss", "axis": "time", "buckets": 10}).json()
    assert sum(chart["series"][0]["count"]) == 30_000
    assert chart["bucket_width"] % 1024 == 0
    zoom = client.get(
        "/jp/v1/jobs/j1/scalars/chart",
        params={
            "metric": "loss",
            "axis": "time",
            "buckets": 10,
            "x_min": body["series"][0]["ts"][100],
            "x_max": body["series"][0]["ts"][109] + 999,
        },
    ).json()
    assert zoom["bucket_width"] == 1000 and zoom["series"][0]["count"] == [1] * 10


def test_charts_of_several_metrics_read_together_equal_each_metrics_chart(client, store):
    post_columns(client, scalar_series("j1", "short", [float(i % 7) for i in range(300)]))
    post_columns(client, scalar_series("j1", "long", [math.sin(i / 50) for i in range(30_000)]))
    post_columns(client, scalar_series("j1", "long", [-1.0] * 500, variant="eval", start=100))
    asked = [
        ("long", None, None, None),
        ("short", ["train"], 10, 250),
        ("nothing", None, None, None),
        ("long", ["eval"], None, None),
    ]
    for axis in ("iter", "time"):  # (over time, the x range of "short" holds no point)
        together = store.scalars.charts(["j1"], asked, axis=axis, buckets=40)
        store.scalars._memory = type(store.scalars._memory)(128)  # nothing remembered: each chart read alone
        alone = [
            store.scalars.chart(["j1"], m, variants=v, axis=axis, buckets=40, x_min=lo, x_max=hi)
            for m, v, lo, hi in asked
        ]
        assert together == alone
        assert [len(c["series"]) for c in together] == ([2, 1, 0, 1] if axis == "iter" else [2, 0, 0, 1])


def test_chart_over_time_uses_timestamps(client):
    post_columns(client, scalar_series("j1", "loss", [1.0, 2.0, 3.0, 4.0]))
    chart = client.get("/jp/v1/jobs/j1/scalars/chart", params={"metric": "loss", "axis": "time", "buckets": 2}).json()
    points = client.get("/jp/v1/jobs/j1/scalars/points", params={"metric": "loss"}).json()
    assert chart["axis"] == "time" and chart["range"] == [points["ts"][0], points["ts"][-1]]
    assert chart["series"][0]["mean"] == [1.5, 3.5]


def test_chart_ignores_non_finite_values_in_mean_but_keeps_them_as_last(client):
    post_columns(client, scalar_series("j1", "loss", [1.0, 3.0, "NaN"]))
    series = client.get("/jp/v1/jobs/j1/scalars/chart", params={"metric": "loss", "buckets": 1}).json()["series"][0]
    assert series["mean"] == [2.0] and series["max"] == [3.0] and series["last"] == ["NaN"]
    assert series["count"] == [3]


def test_compare_shares_one_range_and_bucket_width(client):
    post_columns(client, scalar_series("short", "loss", [1.0] * 50))
    post_columns(client, scalar_series("long", "loss", [2.0] * 200))
    chart = client.get("/jp/v1/scalars/chart", params={"jobs": "short,long", "metric": "loss", "buckets": 20}).json()
    assert chart["range"] == [0, 199] and chart["bucket_width"] == 10
    by_job = {s["job"]: s for s in chart["series"]}
    assert len(by_job["short"]["x"]) == 5 and len(by_job["long"]["x"]) == 20
    assert by_job["short"]["x"] == by_job["long"]["x"][:5]


def test_compare_rejects_unknown_jobs_and_too_many(client):
    post_columns(client, scalar_series("j1", "loss", [1.0]))
    assert client.get("/jp/v1/scalars/chart", params={"jobs": "j1,nope", "metric": "loss"}).status_code == 404
    many = ",".join(f"j{i}" for i in range(101))
    assert (
        client.get("/jp/v1/scalars/chart", params={"jobs": many, "metric": "loss"}).json()["error"]["field"] == "jobs"
    )


def test_points_page_through_every_point_with_a_cursor(client):
    post_columns(client, scalar_series("j1", "loss", [float(i) for i in range(25)], variant="a"))
    post_columns(client, scalar_series("j1", "loss", [float(i) for i in range(5)], variant="b"))
    got, cursor = [], None
    while True:
        params = {"metric": "loss", "limit": 7, **({"cursor": cursor} if cursor else {})}
        page = client.get("/jp/v1/jobs/j1/scalars/points", params=params).json()
        got += list(zip(page["variant"], page["iter"], strict=True))
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert got == [("a", i) for i in range(25)] + [("b", i) for i in range(5)]


def test_points_answer_only_the_fields_asked_for(client):
    post_columns(client, scalar_series("j1", "loss", [float(i) for i in range(25)], variant="a"))
    post_columns(client, scalar_series("j1", "loss", [float(-i) for i in range(5)], variant="b"))
    iters, values, cursor = [], [], None
    while True:
        params = {"metric": "loss", "limit": 7, "fields": "iter,value", **({"cursor": cursor} if cursor else {})}
        page = client.get("/jp/v1/jobs/j1/scalars/points", params=params).json()
        assert set(page) == {"job", "metric", "iter", "value", "next_cursor"}
        iters += page["iter"]
        values += page["value"]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert iters == list(range(25)) + list(range(5))
    assert values == [float(i) for i in range(25)] + [float(-i) for i in range(5)]
    one = client.get("/jp/v1/jobs/j1/scalars/points", params={"metric": "loss", "variant": "b", "fields": "ts"})
    assert set(one.json()) == {"job", "metric", "ts", "next_cursor"} and len(one.json()["ts"]) == 5


def test_points_come_as_an_arrow_stream_when_asked_for_with_the_same_columns_and_cursor(client):
    values: list = [float(i) for i in range(25)]
    values[3], values[4] = "NaN", "Infinity"  # how JSON carries them
    post_columns(client, scalar_series("j1", "loss", values, variant="a"))
    post_columns(client, scalar_series("j1", "loss", [float(-i) for i in range(5)], variant="b"))
    arrow = {"Accept": "application/vnd.apache.arrow.stream"}
    pages, cursor = [], None
    while True:
        params = {"metric": "loss", "limit": 7, **({"cursor": cursor} if cursor else {})}
        answer = client.get("/jp/v1/jobs/j1/scalars/points", params=params, headers=arrow)
        assert answer.headers["content-type"] == "application/vnd.apache.arrow.stream"
        table = pa.ipc.open_stream(answer.content).read_all()
        json_page = client.get("/jp/v1/jobs/j1/scalars/points", params=params).json()
        assert table.column_names == ["variant", "iter", "ts", "value"]
        assert table.column("variant").to_pylist() == json_page["variant"]
        assert table.column("iter").to_pylist() == json_page["iter"]
        assert table.column("ts").to_pylist() == json_page["ts"]
        meta = {k.decode(): v.decode() for k, v in table.schema.metadata.items()}
        assert meta["job"] == "j1" and meta["metric"] == "loss"
        assert meta["next_cursor"] == (json_page["next_cursor"] or "")
        pages.append(table)
        cursor = meta["next_cursor"]
        if not cursor:
            break
    got = pa.concat_tables(pages)
    assert got.num_rows == 30
    stored = got.column("value").to_pylist()[:25]
    assert math.isnan(stored[3]) and stored[4] == math.inf  # kept as floats, not text
    assert stored[:3] + stored[5:] == values[:3] + values[5:]
    only = client.get("/jp/v1/jobs/j1/scalars/points", params={"metric": "loss", "fields": "iter,value"}, headers=arrow)
    assert pa.ipc.open_stream(only.content).read_all().column_names == ["iter", "value"]


def test_points_with_an_unknown_field_are_400(client):
    post_columns(client, scalar_series("j1", "loss", [1.0]))
    answer = client.get("/jp/v1/jobs/j1/scalars/points", params={"metric": "loss", "fields": "iter,colour"})
    assert answer.status_code == 400
    assert answer.json()["error"]["field"] == "fields" and "colour" in answer.json()["error"]["message"]


def test_a_forged_or_foreign_cursor_is_400(client):
    post_columns(client, scalar_series("j1", "loss", [1.0, 2.0]))
    post_columns(client, scalar_series("j1", "acc", [1.0, 2.0]))
    page = client.get("/jp/v1/jobs/j1/scalars/points", params={"metric": "loss", "limit": 1}).json()
    forged = page["next_cursor"][:-2] + ("AA" if not page["next_cursor"].endswith("AA") else "BB")
    answer = client.get("/jp/v1/jobs/j1/scalars/points", params={"metric": "loss", "cursor": forged})
    assert answer.status_code == 400 and answer.json()["error"]["field"] == "cursor"
    foreign = client.get("/jp/v1/jobs/j1/scalars/points", params={"metric": "acc", "cursor": page["next_cursor"]})
    assert foreign.status_code == 400 and "another query" in foreign.json()["error"]["message"]


def test_latest_values_of_many_jobs(client):
    for n in range(5):
        post_columns(client, scalar_series(f"j{n}", "loss", [10.0 + n, 5.0 + n, -1.0 * n]))
    answer = client.post("/jp/v1/scalars/latest", json={"jobs": [f"j{n}" for n in range(5)]}).json()
    assert set(answer["jobs"]) == {f"j{n}" for n in range(5)}
    latest = answer["jobs"]["j3"][0]
    assert (latest["metric"], latest["iter"], latest["value"], latest["min"], latest["max"]) == (
        "loss",
        2,
        -3.0,
        -3.0,
        13.0,
    )
    assert client.get("/jp/v1/scalars/latest", params={"jobs": "j0"}).json()["jobs"]["j0"][0]["value"] == 0.0


def test_latest_values_answer_non_finite_values_as_text_and_every_job_asked_in_its_order(client):
    post_columns(client, scalar_series("inf", "loss", [1.0, "Infinity"]))
    post_columns(client, scalar_series("nan", "loss", ["NaN"]))
    log = {"kind": "log", "worker": "w0", "seq": 1, "ts": NOW_MS, "level": "info", "msg": "no scalars yet"}
    assert post_lines(client, log, project="proj", job="quiet").status_code == 200
    answer = client.post("/jp/v1/scalars/latest", json={"jobs": ["quiet", "nan", "inf"]}).json()["jobs"]
    assert list(answer) == ["quiet", "nan", "inf"] and answer["quiet"] == []
    assert [(r["value"], r["min"], r["max"]) for r in answer["nan"]] == [("NaN", None, None)]
    assert [(r["value"], r["min"], r["max"], r["iter"]) for r in answer["inf"]] == [("Infinity", 1.0, 1.0, 1)]
    assert client.post("/jp/v1/scalars/latest", json={"jobs": ["quiet"]}).json() == {"jobs": {"quiet": []}}


def test_latest_follows_a_rereported_point(client):
    post_columns(client, scalar_series("j1", "loss", [1.0, 2.0]))
    post_lines(
        client,
        {"kind": "scalar", "metric": "loss", "variant": "train", "iter": 1, "value": 7.0},
        project="proj",
        job="j1",
    )
    latest = client.get("/jp/v1/scalars/latest", params={"jobs": "j1"}).json()["jobs"]["j1"][0]
    assert latest["value"] == 7.0 and latest["iter"] == 1


def test_chart_parameters_are_validated(client):
    post_columns(client, scalar_series("j1", "loss", [1.0]))
    for params, field in (
        ({"buckets": 0}, "buckets"),
        ({"axis": "epoch"}, "axis"),
        ({"x_min": "a"}, "x_min"),
        ({"x_min": 10, "x_max": 5}, "x_max"),
    ):
        answer = client.get("/jp/v1/jobs/j1/scalars/chart", params={"metric": "loss", **params})
        assert answer.status_code == 400 and answer.json()["error"]["field"] == field, params
    assert client.get("/jp/v1/jobs/j1/scalars/chart").json()["error"]["field"] == "metric"


def test_an_unknown_metric_gives_an_empty_chart(client):
    post_columns(client, scalar_series("j1", "loss", [1.0]))
    chart = client.get("/jp/v1/jobs/j1/scalars/chart", params={"metric": "nothing"}).json()
    assert chart["series"] == [] and chart["range"] is None


def test_events_page_and_filter_by_iteration(client):
    events = [{"kind": "vector", "metric": "hist", "variant": "w", "iter": i, "values": [i, i + 1]} for i in range(5)]
    post_lines(client, *events, project="proj", job="j1")
    page = client.get("/jp/v1/jobs/j1/events/vector", params={"limit": 2}).json()
    assert [e["iter"] for e in page["events"]] == [0, 1] and page["next_cursor"]
    rest = client.get("/jp/v1/jobs/j1/events/vector", params={"limit": 10, "cursor": page["next_cursor"]}).json()
    assert [e["iter"] for e in rest["events"]] == [2, 3, 4]
    last = client.get("/jp/v1/jobs/j1/events/vector", params={"last": 1}).json()["events"]
    assert [(e["iter"], e["values"]) for e in last] == [(4, [4, 5])]
    metrics = client.get("/jp/v1/jobs/j1/events/vector/metrics").json()["metrics"]
    assert metrics == [{"metric": "hist", "variant": "w", "events": 5, "first_iter": 0, "last_iter": 4}]
    assert client.get("/jp/v1/jobs/j1/events/audio").json()["error"]["field"] == "kind"


def test_latest_values_name_the_first_job_the_key_may_not_read_and_answer_none(client, app, make_key):
    post_columns(client, scalar_series("ours", "loss", [1.0], project="proj"))
    post_columns(client, scalar_series("theirs", "loss", [2.0], project="other"))
    post_columns(client, scalar_series("gone", "loss", [3.0], project="proj"))
    assert client.delete("/jp/v1/jobs/gone").status_code == 200
    with TestClient(app, headers={"Authorization": f"Bearer {make_key(['proj'], 'read')}"}) as reader:
        assert reader.post("/jp/v1/scalars/latest", json={"jobs": ["ours"]}).status_code == 200
        for names, refused in ((["ours", "theirs"], "theirs"), (["gone", "ours"], "gone"), (["nowhere"], "nowhere")):
            answer = reader.post("/jp/v1/scalars/latest", json={"jobs": names})
            assert answer.status_code == 404, names
            assert answer.json()["error"]["field"] == "jobs" and repr(refused) in answer.json()["error"]["message"]
            assert "jobs" not in answer.json()


def test_latest_values_remember_the_projects_they_read_and_still_refuse_other_projects(
    client, store, settings, admin_token, make_key, monkeypatch
):
    post_columns(client, scalar_series("j1", "loss", [1.0], project="proj"))
    replica = create_app(store, settings)  # a second server over the same store: it has not seen j1 written
    access = replica.state.ctx.access
    read: list[list[str]] = []
    projects_of = store.jobs.projects_of
    monkeypatch.setattr(store.jobs, "projects_of", lambda jobs: read.append(jobs) or projects_of(jobs))
    with TestClient(replica, headers={"Authorization": f"Bearer {admin_token}"}) as admin:
        for _ in range(2):
            latest = admin.post("/jp/v1/scalars/latest", json={"jobs": ["j1"]}).json()
            assert latest["jobs"]["j1"][0]["value"] == 1.0
        assert read == [["j1"]] and access.remembered_projects(["j1"]) == {"j1": "proj"}
        post_columns(admin, scalar_series("j1", "loss", [1.0, 2.0], project="proj"))  # its next ingest looks it up
        assert admin.get("/jp/v1/jobs/j1").json()["job"]["status"] == "running"
    with TestClient(replica, headers={"Authorization": f"Bearer {make_key(['other'], 'read')}"}) as outsider:
        answer = outsider.post("/jp/v1/scalars/latest", json={"jobs": ["j1"]})
        assert answer.status_code == 404 and "'j1'" in answer.json()["error"]["message"]
