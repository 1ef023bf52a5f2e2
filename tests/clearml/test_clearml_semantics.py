"""Behaviour a ClearML server has, each shown with the requests a ClearML client (SDK or web app) sends."""

from __future__ import annotations

import base64
import hashlib

from clearml_support import BASE_TS, add_batch, call, fails, image, log, new_task, ok, plot, scalar

SINGLE_VALUE = -(2**31)


def _basic(user: str, secret: str) -> dict[str, str]:
    return {"Authorization": "Basic " + base64.b64encode(f"{user}:{secret}".encode()).decode()}


def _login(client, admin_token: str) -> str:
    key_id = admin_token.split("_")[1]
    return ok(client, "auth.login", method="GET", version=None, headers=_basic(key_id, admin_token))["token"]


# 1 -----------------------------------------------------------------------------------------------------------


def test_a_version_above_the_newest_is_served_as_the_newest(client, admin_token, task):
    key_id = admin_token.split("_")[1]
    status, meta, data = call(client, "auth.login", version="999.0", method="GET", headers=_basic(key_id, admin_token))
    assert status == 200 and data["token"]
    assert meta["endpoint"] == {"name": "auth.login", "requested_version": "999.0", "actual_version": "2.1"}
    _, meta, data = call(client, "tasks.get_by_id", {"task": task}, version="999.0")
    assert data["task"]["id"] == task and meta["endpoint"]["actual_version"] == "2.23"


# 2 -----------------------------------------------------------------------------------------------------------


def _recycled(task: str, n: int) -> dict:
    """The SDK's n-th debug image of a series whose file history holds 4 files: file ``n % 4`` is written over."""
    key = f"clearml-tests/task.{task}/metrics/M/V/M_V_{n % 4:08d}.png"
    return {
        "type": "training_debug_image",
        "task": task,
        "metric": "M",
        "variant": "V",
        "iter": n,
        "key": key,
        "url": f"http://files.example:8081/{key}",
        "timestamp": BASE_TS + n,
    }


def test_a_debug_image_written_over_replaces_the_earlier_event_of_its_url(client, task):
    add_batch(client, *[_recycled(task, n) for n in range(6)])
    add_batch(client, *[_recycled(task, n) for n in range(6, 10)])
    sample = ok(client, "events.get_debug_image_sample", {"task": task, "metric": "M", "variant": "V"}, version="2.31")
    assert (sample["event"]["iter"], sample["min_iteration"], sample["max_iteration"]) == (9, 6, 9)
    shown = ok(client, "events.debug_images", {"metrics": [{"task": task, "metric": "M"}], "iters": 10})
    assert [i["iter"] for i in shown["metrics"][0]["iterations"]] == [9, 8, 7, 6]
    stored = ok(client, "events.get_task_events", {"task": task, "event_type": "training_debug_image"})
    assert stored["total"] == 4 and sorted(e["url"][-16:] for e in stored["events"]) == [
        f"M_V_{n:08d}.png" for n in range(4)
    ]


# 3 -----------------------------------------------------------------------------------------------------------


def test_a_debug_image_event_needs_only_its_task_and_type(client, task):
    bare = {"type": "training_debug_image", "task": task, "timestamp": BASE_TS}
    named = {"type": "training_debug_image", "task": task, "metric": "m", "variant": "v", "iter": 3}
    answer = add_batch(client, bare, named)
    assert answer == {"added": 2, "errors": 0, "errors_info": {}}
    events = ok(client, "events.get_task_events", {"task": task, "event_type": "training_debug_image"})["events"]
    assert {(e["metric"], e["variant"], e["iter"]) for e in events} == {("", "", 0), ("m", "v", 3)}
    assert all("url" not in e for e in events)


# 4 -----------------------------------------------------------------------------------------------------------


def test_next_debug_image_sample_past_the_last_answers_no_event(client, task):
    add_batch(client, image(task, "m", "v", 1), image(task, "m", "v", 2))
    last = ok(client, "events.get_debug_image_sample", {"task": task, "metric": "m", "variant": "v"})
    past = ok(client, "events.next_debug_image_sample", {"task": task, "scroll_id": last["scroll_id"]})
    assert past == {"scroll_id": last["scroll_id"], "event": None, "min_iteration": None, "max_iteration": None}
    back = ok(
        client,
        "events.next_debug_image_sample",
        {"task": task, "scroll_id": past["scroll_id"], "navigate_earlier": True},
    )
    assert back["event"]["iter"] == 1


def test_next_plot_sample_past_the_last_answers_no_events(client, task):
    add_batch(client, plot(task, "p", "a", 1), plot(task, "p", "a", 2))
    last = ok(client, "events.get_plot_sample", {"task": task, "metric": "p"})
    past = ok(client, "events.next_plot_sample", {"task": task, "scroll_id": last["scroll_id"]})
    assert past == {"scroll_id": last["scroll_id"], "events": [], "min_iteration": None, "max_iteration": None}


# 5 -----------------------------------------------------------------------------------------------------------


def test_log_events_keep_their_iteration_metric_and_variant(client, task):
    named = [
        {**log(task, f"iter {i}", BASE_TS + i), "iter": i, "metric": "metric", "variant": "variant"} for i in (0, 1)
    ]
    add_batch(client, log(task, "plain", BASE_TS - 1), *named)
    events = ok(client, "events.get_task_log", {"task": task, "navigate_earlier": False})["events"]
    assert [(e["msg"], e.get("iter"), e["metric"], e["variant"]) for e in events] == [
        ("plain", None, "", ""),
        ("iter 0", 0, "metric", "variant"),
        ("iter 1", 1, "metric", "variant"),
    ]
    metrics = ok(client, "events.get_task_metrics", {"tasks": [task], "event_type": "log"})["metrics"]
    assert metrics == [{"task": task, "metrics": ["metric"]}]
    chosen = ok(client, "events.get_task_log", {"task": task, "metrics": [{"metric": "metric"}]}, version="2.30")
    assert chosen["total"] == 2 and [e["msg"] for e in chosen["events"]] == ["iter 1", "iter 0"]
    everything = ok(client, "events.get_task_events", {"task": task, "event_type": "log"})["events"]
    assert [e.get("iter") for e in everything] == [None, 0, 1]


def test_clear_task_log_leaves_the_lines_of_excluded_metrics(client, task):
    named = {**log(task, "kept", BASE_TS), "iter": 0, "metric": "keep"}
    add_batch(client, named, log(task, "gone", BASE_TS + 1))
    assert ok(client, "events.clear_task_log", {"task": task, "exclude_metrics": ["keep"]}, version="2.30") == {
        "deleted": 1
    }
    events = ok(client, "events.get_task_log", {"task": task})["events"]
    assert [(e["msg"], e["metric"]) for e in events] == [("kept", "keep")]


# 6 -----------------------------------------------------------------------------------------------------------


def test_scalar_metrics_iter_raw_keeps_the_batch_size_in_its_scroll(client, task):
    add_batch(client, *[scalar(task, "loss", "train", i, float(i)) for i in range(100)])
    body = {"task": task, "metric": {"metric": "loss"}, "batch_size": 15, "count_total": True}
    page = ok(client, "events.scalar_metrics_iter_raw", body)
    sizes, seen = [page["returned"]], page["variants"]["train"]["iter"]
    while page["returned"]:
        body = {"task": task, "metric": {"metric": "loss"}, "scroll_id": page["scroll_id"]}
        page = ok(client, "events.scalar_metrics_iter_raw", body)
        sizes.append(page["returned"])
        seen += page["variants"].get("train", {}).get("iter", [])
    assert sizes == [15, 15, 15, 15, 15, 15, 10, 0] and seen == list(range(100))


# 7 -----------------------------------------------------------------------------------------------------------


def _last_metrics(client, task: str) -> dict:
    task_data = ok(client, "tasks.get_by_id", {"task": task})["task"]
    (variants,) = task_data["last_metrics"].values()
    (entry,) = variants.values()
    return entry


def test_last_metrics_of_two_batches_as_clearml_keeps_them(client, task):
    events = [scalar(task, "Metric1", "Variant1", i, float(i)) for i in range(100)]
    add_batch(client, *events[:50])
    add_batch(client, *events[50:])
    entry = _last_metrics(client, task)
    assert entry == {
        "metric": "Metric1",
        "variant": "Variant1",
        "value": 99.0,
        "min_value": 0.0,
        "min_value_iteration": 0,
        "max_value": 99.0,
        "max_value_iteration": 99,
        "first_value": 0.0,
        "first_value_iteration": 0,
        "mean_value": 49.5,
        "count": 100,
    }
    latest = ok(client, "events.get_task_latest_scalar_values", {"task": task})
    assert latest["last_iter"] == 99


def test_the_last_value_is_the_one_reported_last_also_for_a_single_value(client, task):
    add_batch(client, *[scalar(task, "m", "v", i or SINGLE_VALUE, float(i), ts=BASE_TS + i) for i in range(10)])
    assert _last_metrics(client, task)["value"] == 9.0
    add_batch(client, scalar(task, "m", "v", SINGLE_VALUE, 1000.0, ts=BASE_TS + 100))
    entry = _last_metrics(client, task)
    assert entry["value"] == 1000.0 and entry["max_value"] == 1000.0 and entry["max_value_iteration"] == SINGLE_VALUE
    raw = ok(client, "events.scalar_metrics_iter_raw", {"task": task, "metric": {"metric": "m", "variants": ["v"]}})
    assert raw["variants"]["v"]["y"] == [1000.0, *[float(i) for i in range(1, 10)]]


def test_of_two_reports_of_one_point_in_a_batch_the_later_timestamp_wins(client, task):
    add_batch(
        client,
        scalar(task, "Summary", "acc", SINGLE_VALUE, 1000.0, ts=BASE_TS + 5),
        scalar(task, "Summary", "acc", SINGLE_VALUE, 9.0, ts=BASE_TS + 1),
    )
    assert _last_metrics(client, task)["value"] == 1000.0
    single = ok(client, "events.get_task_single_value_metrics", {"tasks": [task]})["tasks"][0]["values"]
    assert [v["value"] for v in single] == [1000.0]


# 8 -----------------------------------------------------------------------------------------------------------


def test_get_unique_metric_variants_of_a_project_and_of_tasks(client):
    project = ok(client, "projects.create", {"name": "unique metrics"})["id"]
    first, second = new_task(client, "one", "unique metrics"), new_task(client, "two", "unique metrics")
    sub = new_task(client, "three", "unique metrics/sub")
    add_batch(
        client,
        scalar(first, "Metric1", "Variant", 0, 10.0),
        scalar(second, "Metric2", "Variant", 0, 10.0),
        scalar(sub, "Metric3", "Variant", 0, 10.0),
    )
    metrics = ok(client, "projects.get_unique_metric_variants", {"project": project})["metrics"]
    assert {m["metric"] for m in metrics} == {"Metric1", "Metric2", "Metric3"}
    assert metrics[0]["metric_hash"] == hashlib.md5(b"Metric1").hexdigest()  # noqa: S324 - ClearML's key
    assert metrics[0]["variant_hash"] == hashlib.md5(b"Variant").hexdigest()  # noqa: S324
    only_here = ok(client, "projects.get_unique_metric_variants", {"project": project, "include_subprojects": False})
    assert {m["metric"] for m in only_here["metrics"]} == {"Metric1", "Metric2"}
    of_task = ok(client, "projects.get_unique_metric_variants", {"ids": [first]})["metrics"]
    assert [(m["metric"], m["variant"]) for m in of_task] == [("Metric1", "Variant")]


def test_delete_and_reset_answer_the_files_of_the_task_in_clearmls_form(client, task):
    ok(client, "tasks.add_or_update_artifacts", {"task": task, "artifacts": [{"key": "a", "uri": "s3://b/a.csv"}]})
    model = ok(client, "models.update_for_task", {"task": task, "uri": "s3://b/model.pt", "name": "m"})["id"]
    assert model
    add_batch(
        client,
        image(task, "img", "v", 1),
        plot(task, "p", "v", 1, {"layout": {"images": [{"source": "http://f/x.png"}]}}),
    )
    reset = ok(client, "tasks.reset", {"task": task, "force": True, "return_file_urls": True})
    assert reset["urls"] == {
        "model_urls": ["s3://b/model.pt"],
        "event_urls": ["http://f/x.png", "http://files.example/img/v/1.png"],
        "artifact_urls": ["s3://b/a.csv"],
    }
    assert ok(client, "tasks.reset", {"task": task, "force": True})["urls"] is None
    add_batch(client, image(task, "img", "v", 2))
    deleted = ok(client, "tasks.delete", {"task": task, "force": True, "return_file_urls": True})
    assert deleted["deleted"] is True and deleted["events"] == {"deleted": 1}
    assert deleted["urls"]["event_urls"] == ["http://files.example/img/v/2.png"]


# 9 -----------------------------------------------------------------------------------------------------------


def test_the_x_axis_label_of_a_scalar_series_is_kept_and_served(client, task):
    labelled = [{**scalar(task, "loss", "train", i, float(i)), "x_axis_label": "epoch"} for i in range(3)]
    add_batch(client, *labelled, version="2.31")
    histogram = ok(client, "events.scalar_metrics_iter_histogram", {"task": task}, version="2.31")
    assert histogram["loss"]["train"]["x_axis_label"] == "epoch" and histogram["loss"]["train"]["x"] == [0, 1, 2]
    assert _last_metrics(client, task)["x_axis_label"] == "epoch"
    compared = ok(client, "events.multi_task_scalar_metrics_iter_histogram", {"tasks": [task]}, version="2.31")
    assert compared["metrics"]["loss"]["train"][task]["x_axis_label"] == "epoch"
    add_batch(client, {**scalar(task, "loss", "train", 3, 3.0), "x_axis_label": "step"}, version="2.31")
    assert _last_metrics(client, task)["x_axis_label"] == "step"


def test_the_newest_events_endpoints_are_served(client, task):
    add_batch(client, scalar(task, "loss", "train", 0, 1.0), plot(task, "roc", "a", 0))
    _, meta, data = call(client, "events.get_multi_task_metrics", {"tasks": [task]}, version="2.31")
    assert meta["endpoint"]["actual_version"] == "2.28"
    assert data == {"metrics": [{"metric": "loss", "variants": ["train"]}, {"metric": "roc", "variants": ["a"]}]}
    _, meta, _ = call(client, "events.get_task_log", {"task": task}, version="2.31")
    assert meta["endpoint"]["actual_version"] == "2.30"


# 10 ----------------------------------------------------------------------------------------------------------


def test_a_debug_image_file_is_read_with_every_credential_the_sdk_and_web_apps_send(
    client, anonymous, admin_token, task
):
    path = f"clearml-tests/task.{task}/metrics/img/v/img_v_00000000.png"
    png = b"\x89PNG\r\n\x1a\nDATA"
    jwt = _login(client, admin_token)
    sdk = {"Authorization": f"Bearer {jwt}"}
    upload = anonymous.post("/clearml/files", files={f"/{path}": (path, png, "image/png")}, headers=sdk)
    assert upload.status_code == 200
    url = f"/clearml/files/{path}"
    assert anonymous.get(url, headers=sdk).content == png
    assert anonymous.get(url, headers={"Cookie": f"clearml_token_basic={jwt}"}).content == png
    session = client.app.state.ctx.access.session_for(admin_token.split("_")[1])
    assert anonymous.get(url, headers={"Cookie": f"jobpulse_session={session}"}).content == png
    refused = anonymous.get(url)
    assert refused.status_code == 401 and refused.json()["meta"]["result_subcode"] == 20
    assert anonymous.get(url, headers={"Cookie": "clearml_token_basic=a.b.c"}).status_code == 401
    assert anonymous.delete(url, headers={"Cookie": f"clearml_token_basic={jwt}"}).status_code == 401
    fails(anonymous, "tasks.get_by_id", {"task": task}, code=401, subcode=20)


def test_last_metrics_find_the_extremes_anywhere_in_a_long_series(client, task):
    values = [float((i - 150) ** 2) for i in range(200)]
    values[10] = float("nan")
    add_batch(client, *[scalar(task, "m", "v", i, v) for i, v in enumerate(values) if i != 10])
    raw = b'{"type": "training_stats_scalar", "task": "%s", "metric": "m", "variant": "v", "iter": 10, "value": NaN}'
    ok(client, "events.add_batch", raw=raw % task.encode())
    entry = _last_metrics(client, task)
    finite = [v for i, v in enumerate(values) if i != 10]
    assert (entry["min_value"], entry["min_value_iteration"]) == (0.0, 150)
    assert (entry["max_value"], entry["max_value_iteration"]) == (22500.0, 0)
    assert entry["count"] == 200 and entry["mean_value"] == sum(finite) / len(finite)


def test_last_metrics_of_many_series_at_once(client, task):
    add_batch(client, *[scalar(task, "m", f"v{k}", i, float(k * 10 + i)) for k in range(120) for i in range(2)])
    (variants,) = ok(client, "tasks.get_by_id", {"task": task})["task"]["last_metrics"].values()
    assert len(variants) == 120
    assert all(
        (e["value"], e["first_value"], e["min_value_iteration"], e["max_value_iteration"])
        == (float(int(e["variant"][1:]) * 10 + 1), float(int(e["variant"][1:]) * 10), 0, 1)
        for e in variants.values()
    )
