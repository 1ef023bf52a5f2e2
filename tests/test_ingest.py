"""POST /jp/v1/ingest: forms, encodings, partial batches, bounds, idempotency, group commit."""

from __future__ import annotations

import gzip
import threading

import orjson
import zstandard

from helpers import NOW_MS, lines, post_columns, post_lines, scalar_series


def test_json_lines_of_every_kind_are_stored(client):
    url = client.put("/jp/v1/jobs/j1/files/a.png", content=b"\x89PNG", headers={}).status_code
    assert url == 404  # the job does not exist yet: files need a job
    answer = post_lines(
        client,
        {"kind": "scalar", "metric": "loss", "variant": "train", "iter": 1, "value": 0.5, "ts": NOW_MS},
        {"kind": "vector", "metric": "hist", "variant": "w", "iter": 1, "values": [1, 2, 3]},
        {"kind": "plot", "metric": "roc", "variant": "val", "iter": 1, "plot": {"data": [{"x": [0, 1]}]}},
        {"kind": "image", "metric": "samples", "variant": "aug", "iter": 1, "url": "/x.png"},
        {"kind": "log", "worker": "worker-0", "seq": 1, "level": "warning", "msg": "hello", "ts": NOW_MS},
        {
            "kind": "system",
            "worker": "worker-0",
            "metric": "gpu_util",
            "device": "0",
            "value": 97,
            "ts": NOW_MS,
        },
        project="proj",
        job="j1",
    )
    assert answer.status_code == 200, answer.text
    assert answer.json() == {"accepted": 6, "rejected": 0, "errors": {}, "examples": []}
    assert client.get("/jp/v1/jobs/j1/scalars/points", params={"metric": "loss"}).json()["value"] == [0.5]
    assert client.get("/jp/v1/jobs/j1/events/vector").json()["events"][0]["values"] == [1, 2, 3]
    assert client.get("/jp/v1/jobs/j1/events/plot").json()["events"][0]["plot"] == {"data": [{"x": [0, 1]}]}
    assert client.get("/jp/v1/jobs/j1/events/image").json()["events"][0]["key"] == "samples/aug/1"
    log = client.get("/jp/v1/jobs/j1/logs").json()["lines"]
    assert [(line["msg"], line["level"], line["worker"]) for line in log] == [("hello", "warning", "worker-0")]
    series = client.get("/jp/v1/jobs/j1/system/series", params={"metric": "gpu_util"}).json()["series"]
    assert series[0]["device"] == "0" and series[0]["avg"] == [97.0]


def test_columnar_series_are_stored(client):
    answer = post_columns(client, scalar_series("j1", "loss", [3.0, 2.0, 1.0]))
    assert answer.json()["accepted"] == 3
    points = client.get("/jp/v1/jobs/j1/scalars/points", params={"metric": "loss"}).json()
    assert points["iter"] == [0, 1, 2] and points["value"] == [3.0, 2.0, 1.0]


def test_gzip_and_zstd_bodies_are_decoded(client):
    body = orjson.dumps(scalar_series("j1", "loss", [1.0, 2.0]))
    for encoding, data in (
        ("gzip", gzip.compress(body)),
        ("zstd", zstandard.ZstdCompressor().compress(body)),
    ):
        answer = client.post(
            "/jp/v1/ingest",
            content=data,
            headers={"Content-Type": "application/json", "Content-Encoding": encoding},
        )
        assert answer.json()["accepted"] == 2, encoding


def test_non_finite_values_are_kept(client):
    post_columns(client, scalar_series("j1", "loss", [1.0, "NaN", "Infinity", "-Infinity"]))
    values = client.get("/jp/v1/jobs/j1/scalars/points", params={"metric": "loss"}).json()["value"]
    assert values == [1.0, "NaN", "Infinity", "-Infinity"]


def test_mixed_batch_stores_good_events_and_counts_bad_ones_per_reason(client):
    answer = post_lines(
        client,
        {"kind": "scalar", "metric": "loss", "iter": 1, "value": 1.0},
        {"kind": "scalar", "metric": "loss", "value": 2.0},
        {"kind": "scalar", "metric": "loss", "iter": 3, "value": "high"},
        {"kind": "log", "msg": "no seq"},
        {"kind": "teapot"},
        project="proj",
        job="j1",
    )
    body = answer.json()
    assert answer.status_code == 200
    assert body["accepted"] == 1 and body["rejected"] == 4
    assert body["errors"] == {"invalid_iter": 1, "invalid_value": 1, "invalid_seq": 1, "invalid_kind": 1}
    assert [e["index"] for e in body["examples"]] == [1, 2, 3, 4]
    assert client.get("/jp/v1/jobs/j1/scalars/points", params={"metric": "loss"}).json()["iter"] == [1]


def test_all_bad_batch_is_400_naming_the_problem(client):
    answer = post_lines(client, {"kind": "scalar", "metric": "loss", "value": 1.0}, project="proj", job="j1")
    assert answer.status_code == 400
    assert answer.json()["error"]["code"] == "no_valid_events"
    assert "'iter'" in answer.json()["error"]["message"]


def test_the_kind_may_come_from_the_query_in_every_form(client):
    scalar = {"metric": "loss", "iter": 1, "value": 0.5, "ts": NOW_MS}
    assert post_lines(client, scalar, project="proj", job="j1", kind="scalar").json()["accepted"] == 1
    odd = {"kind": "log", "seq": 1, "msg": "its own kind wins", "ts": NOW_MS}
    mixed = post_lines(client, scalar | {"iter": 2}, odd, project="proj", job="j1", kind="scalar")
    assert mixed.json()["accepted"] == 2
    body = scalar_series("j1", "loss", [1.0, 2.0], variant="", start=3)
    del body["series"][0]["kind"]
    assert post_columns(client, body, kind="scalar").json()["accepted"] == 2
    vector = {"kind": "vector", "metric": "hist", "iter": 1, "values": [1, 2]}  # lines read one by one
    assert (
        post_lines(client, scalar | {"iter": 5}, vector, project="proj", job="j1", kind="scalar").json()["accepted"]
        == 2
    )
    points = client.get("/jp/v1/jobs/j1/scalars/points", params={"metric": "loss"}).json()
    assert points["iter"] == [1, 2, 3, 4, 5]
    assert [line["msg"] for line in client.get("/jp/v1/jobs/j1/logs").json()["lines"]] == ["its own kind wins"]


def test_unparseable_body_is_400(client):
    answer = client.post("/jp/v1/ingest", content=b"{not json", headers={"Content-Type": "application/json"})
    assert answer.status_code == 400 and answer.json()["error"]["field"] == "body"


def test_empty_body_is_400(client):
    answer = client.post("/jp/v1/ingest", content=b"\n\n", headers={"Content-Type": "application/x-ndjson"})
    assert answer.status_code == 400 and "no events" in answer.json()["error"]["message"]


def test_unsupported_encoding_is_400(client):
    answer = client.post(
        "/jp/v1/ingest", content=b"x", headers={"Content-Type": "application/json", "Content-Encoding": "br"}
    )
    assert answer.status_code == 400 and answer.json()["error"]["field"] == "Content-Encoding"


def test_unsupported_content_type_is_400(client):
    answer = client.post("/jp/v1/ingest", content=b"x", headers={"Content-Type": "text/csv"})
    assert answer.status_code == 400 and answer.json()["error"]["field"] == "Content-Type"


def test_body_over_the_limit_is_413(store, settings, admin_token):
    from dataclasses import replace

    from starlette.testclient import TestClient

    from jobpulse.server import create_app

    app = create_app(store, replace(settings, max_body_bytes=1000))
    with TestClient(app, headers={"Authorization": f"Bearer {admin_token}"}) as small:
        answer = post_columns(small, scalar_series("j1", "loss", [1.0] * 200))
        assert answer.status_code == 413 and answer.json()["error"]["code"] == "payload_too_large"
        bomb = gzip.compress(b" " * 100_000)
        answer = small.post(
            "/jp/v1/ingest",
            content=bomb,
            headers={"Content-Type": "application/json", "Content-Encoding": "gzip"},
        )
        assert answer.status_code == 413


def test_columnar_length_mismatch_rejects_that_series(client):
    body = scalar_series("j1", "loss", [1.0, 2.0])
    body["series"][0]["iter"] = [0, 1, 2]
    body["series"].append(scalar_series("j1", "acc", [0.5])["series"][0])
    answer = post_columns(client, body).json()
    assert answer["accepted"] == 1 and answer["errors"] == {"length_mismatch": 2}


def test_a_new_job_needs_a_project(client):
    answer = post_lines(client, {"kind": "scalar", "metric": "m", "iter": 1, "value": 1.0}, job="fresh")
    assert answer.status_code == 400 and answer.json()["errors"] == {"missing_project": 1}


def test_a_key_of_one_project_creates_jobs_there_without_naming_it(anonymous, make_key):
    token = make_key(["solo"], "write")
    answer = post_lines(anonymous, {"kind": "scalar", "metric": "m", "iter": 1, "value": 1.0}, job="fresh")
    assert answer.status_code == 401
    anonymous.headers["Authorization"] = f"Bearer {token}"
    assert (
        post_lines(anonymous, {"kind": "scalar", "metric": "m", "iter": 1, "value": 1.0}, job="fresh").json()[
            "accepted"
        ]
        == 1
    )
    assert anonymous.get("/jp/v1/jobs/fresh").json()["job"]["project"] == "solo"


def test_events_for_a_job_of_another_project_are_rejected(client):
    post_columns(client, scalar_series("j1", "loss", [1.0]))
    answer = post_columns(client, scalar_series("j1", "loss", [2.0], project="other"))
    assert answer.status_code == 400 and answer.json()["errors"] == {"job_in_other_project": 1}


def test_out_of_range_timestamps_and_iterations_are_rejected(client):
    answer = post_lines(
        client,
        {"kind": "scalar", "metric": "m", "iter": 1, "value": 1.0, "ts": 5},
        {"kind": "scalar", "metric": "m", "iter": 2**60, "value": 1.0},
        {"kind": "scalar", "metric": "m" * 300, "iter": 1, "value": 1.0},
        {"kind": "scalar", "metric": "m", "iter": 1, "value": 1.0},
        project="proj",
        job="j1",
    )
    assert answer.json()["errors"] == {"ts_out_of_range": 1, "iter_out_of_range": 1, "invalid_metric": 1}


def test_resent_batch_does_not_duplicate(client):
    events = (
        [{"kind": "scalar", "metric": "loss", "iter": i, "value": float(i), "ts": NOW_MS} for i in range(5)]
        + [{"kind": "log", "worker": "w", "seq": i, "msg": f"line {i}", "ts": NOW_MS} for i in range(5)]
        + [
            {"kind": "system", "worker": "w", "metric": "cpu_cores", "value": 2.0, "ts": NOW_MS - i * 1000}
            for i in range(5)
        ]
    )
    for _ in range(3):
        assert post_lines(client, *events, project="proj", job="j1").json()["accepted"] == 15
    assert len(client.get("/jp/v1/jobs/j1/scalars/points", params={"metric": "loss"}).json()["iter"]) == 5
    assert client.get("/jp/v1/jobs/j1/logs/count").json()["lines"] == 5
    assert client.get("/jp/v1/jobs/j1/logs/workers").json()["workers"] == [
        {"worker": "w", "lines": 5, "bytes": sum(len(f"line {i}") + 1 for i in range(5))}
    ]
    series = client.get("/jp/v1/jobs/j1/system/series", params={"metric": "cpu_cores", "step": "1m"}).json()
    assert sum(sum(s["count"]) for s in series["series"]) == 5


def test_a_rereported_scalar_replaces_the_old_value(client):
    post_lines(client, {"kind": "scalar", "metric": "loss", "iter": 7, "value": 1.0}, project="proj", job="j1")
    post_lines(client, {"kind": "scalar", "metric": "loss", "iter": 7, "value": 9.0}, project="proj", job="j1")
    points = client.get("/jp/v1/jobs/j1/scalars/points", params={"metric": "loss"}).json()
    assert points["iter"] == [7] and points["value"] == [9.0]


def test_concurrent_writers_share_commits_and_lose_nothing(app, client):
    writers, per_writer = 16, 200
    errors: list[str] = []

    def write(n: int) -> None:
        body = {
            "project": "proj",
            "job": "j1",
            "series": [
                {
                    "kind": "log",
                    "worker": f"w{n}",
                    "seq": list(range(per_writer)),
                    "ts": [NOW_MS + i for i in range(per_writer)],
                    "msg": [f"{n}:{i}" for i in range(per_writer)],
                }
            ],
        }
        answer = post_columns(client, body)
        if answer.status_code != 200 or answer.json()["accepted"] != per_writer:
            errors.append(answer.text)

    post_columns(client, scalar_series("j1", "warmup", [1.0]))
    stats = app.state.ctx.committer.stats
    before = (stats.requests, stats.commits)
    threads = [threading.Thread(target=write, args=(n,)) for n in range(writers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    assert client.get("/jp/v1/jobs/j1/logs/count").json()["lines"] == writers * per_writer
    requests, commits = stats.requests - before[0], stats.commits - before[1]
    assert requests == writers
    assert commits < requests  # requests that arrived together were written by one insert


def test_jobs_and_workers_are_created_on_first_sight(client):
    post_lines(
        client,
        {"kind": "log", "worker": "worker-3", "seq": 1, "msg": "hi", "ts": NOW_MS - 5000},
        project="proj",
        job="new-job",
    )
    job = client.get("/jp/v1/jobs/new-job").json()
    assert job["job"]["status"] == "running" and job["job"]["started"] == NOW_MS - 5000
    assert [w["worker"] for w in job["workers"]] == ["worker-3"]


def test_json_lines_content_type_variants_are_accepted(client):
    for content_type in ("application/x-ndjson", "application/jsonl", "application/x-ndjson; charset=utf-8"):
        answer = client.post(
            "/jp/v1/ingest",
            params={"project": "proj", "job": "j1"},
            content=lines({"kind": "scalar", "metric": "m", "iter": 1, "value": 1}),
            headers={"Content-Type": content_type},
        )
        assert answer.json()["accepted"] == 1, content_type
