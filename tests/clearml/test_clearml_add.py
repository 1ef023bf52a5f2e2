"""events.add and events.add_batch: what is stored, what is refused and why, and re-sends."""

from __future__ import annotations

import json

import orjson
from clearml_support import BASE_TS, add_batch, call, fails, image, lines, log, new_task, ok, plot, scalar


def test_a_mixed_batch_stores_the_good_events_and_counts_the_bad_per_reason(client, task):
    events = [
        scalar(task, "loss", "train", 0, 1.5),
        {"type": "training_stats_scalar", "task": task, "metric": "loss", "variant": "train", "iter": 1},
        {"task": task, "metric": "loss"},
        {"type": "nonsense", "task": task},
        {"type": "log", "msg": "no task"},
        scalar("0" * 32, "loss", "train", 2, 1.0),
        scalar(task, "loss", "train", 3, 2.5),
        {"type": "training_stats_scalar", "task": task, "metric": "loss", "variant": "train", "iter": "x", "value": 1},
        log(task, "a line", BASE_TS),
    ]
    raw = lines(*events) + b"\n{not json"
    answer = ok(client, "events.add_batch", raw=raw)
    assert answer["added"] == 3
    assert answer["errors"] == 7
    assert answer["errors_info"] == {
        "Scalar event must have a numeric 'value'": 1,
        "Event must have a 'type' field": 1,
        "Invalid event type nonsense": 1,
        "Event must have a 'task' field": 1,
        "Invalid task id": 1,
        "Invalid iteration: must be an integer": 1,
        "Event is not a JSON object": 1,
    }
    cols, _ = client.app.state.ctx.store.scalars.page(task, "loss")
    assert cols["iter"].tolist() == [0, 3] and cols["value"].tolist() == [1.5, 2.5]
    assert [line["msg"] for line in client.app.state.ctx.store.logs.read(task)] == ["a line"]


def test_a_batch_of_only_bad_events_is_events_not_added(client, task):
    meta = fails(client, "events.add_batch", raw=lines({"type": "nonsense", "task": task}), code=400, subcode=131)
    assert meta["error_data"] == {"Invalid event type nonsense": 1}


def test_an_empty_batch_is_refused(client):
    fails(client, "events.add_batch", raw=b"\n\n", code=400, subcode=17)


def test_every_kind_is_stored_and_read_back_unchanged(client, task):
    figure = {"data": [{"x": [1, 2], "y": [3, 4]}], "layout": {"title": "t"}}
    add_batch(
        client,
        scalar(task, "loss", "train", 5, 0.25),
        plot(task, "roc", "v", 1, figure),
        image(task, "img", "rand", 2),
        log(task, "line1\nline2", BASE_TS + 9, level="warn"),
        {
            "type": "training_stats_vector",
            "task": task,
            "metric": "vec",
            "variant": "v",
            "iter": 3,
            "values": [1.0, 2.0, 3.5],
            "timestamp": BASE_TS,
        },
    )
    events = ok(client, "events.get_task_events", {"task": task})["events"]
    by_type = {e["type"]: e for e in events}
    assert by_type["training_stats_scalar"]["value"] == 0.25
    assert json.loads(by_type["plot"]["plot_str"]) == figure
    assert by_type["training_debug_image"]["url"] == "http://files.example/img/rand/2.png"
    assert by_type["training_debug_image"]["key"] == "img/rand/2.png"
    assert by_type["log"]["msg"] == "line1\nline2" and by_type["log"]["level"] == "warning"
    assert by_type["training_stats_vector"]["value"] == [1.0, 2.0, 3.5]


def test_a_resent_scalar_replaces_the_old_one(client, task):
    add_batch(client, scalar(task, "loss", "train", 1, 1.0))
    add_batch(client, scalar(task, "loss", "train", 1, 7.0))
    data = ok(client, "events.get_scalar_metric_data", {"task": task, "metric": "loss"})
    assert [e["value"] for e in data["events"]] == [7.0] and data["total"] == 1


def test_a_resent_log_batch_is_stored_once(client, task):
    batch = [log(task, f"line {i}", BASE_TS + i // 3) for i in range(9)]
    add_batch(client, *batch)
    add_batch(client, *batch)
    data = ok(client, "events.get_task_log", {"task": task, "navigate_earlier": False, "batch_size": 100})
    assert [e["msg"] for e in data["events"]] == [f"line {i}" for i in range(9)]
    assert data["total"] == 9


def test_distinct_lines_sharing_a_timestamp_in_two_batches_are_all_kept_in_arrival_order(client, task):
    add_batch(client, log(task, "first", BASE_TS), log(task, "second", BASE_TS))
    add_batch(client, log(task, "third", BASE_TS), log(task, "fourth", BASE_TS + 5))
    data = ok(client, "events.get_task_log", {"task": task, "navigate_earlier": False})
    assert [e["msg"] for e in data["events"]] == ["first", "second", "third", "fourth"]


def test_nan_and_infinity_written_by_python_are_accepted(client, task):
    raw = (
        b'{"type": "training_stats_scalar", "task": "%s", "metric": "m", "variant": "v", "iter": 0, '
        b'"value": NaN, "timestamp": %d}' % (task.encode(), BASE_TS)
    )
    assert ok(client, "events.add_batch", raw=raw)["added"] == 1
    values = ok(client, "events.scalar_metrics_iter_raw", {"task": task, "metric": {"metric": "m"}})
    assert values["variants"]["v"]["y"] == [None]


def test_a_value_is_kept_as_a_64_bit_float(client, task):
    add_batch(client, scalar(task, "m", "v", 0, 0.1 + 0.2), scalar(task, "m", "v", 1, 1e300))
    values = ok(client, "events.scalar_metrics_iter_raw", {"task": task, "metric": {"metric": "m"}})
    assert values["variants"]["v"]["y"] == [0.1 + 0.2, 1e300]


def test_events_add_stores_one_event(client, task):
    answer = ok(client, "events.add", scalar(task, "acc", "val", 3, 0.5))
    assert answer == {"added": 1, "errors": 0, "errors_info": {}}
    assert ok(client, "events.get_scalar_metrics_and_variants", {"task": task})["metrics"] == {"acc": ["val"]}


def test_a_json_array_body_is_accepted(client, task):
    raw = orjson.dumps([scalar(task, "m", "v", 0, 1.0), scalar(task, "m", "v", 1, 2.0)])
    assert ok(client, "events.add_batch", raw=raw)["added"] == 2


def test_the_worker_header_names_the_worker_of_events_without_one(client, task):
    event = log(task, "hello", BASE_TS)
    del event["worker"]
    call(client, "events.add_batch", raw=lines(event), headers={"X-ClearML-Worker": "host a"})
    assert client.app.state.ctx.store.logs.read(task)[0]["worker"] == "host_a"


def test_published_tasks_refuse_events_unless_allow_locked(client, task):
    ok(client, "tasks.completed", {"task": task, "publish": True})
    meta = fails(client, "events.add_batch", raw=lines(scalar(task, "m", "v", 0, 1.0)), code=400, subcode=131)
    assert meta["error_data"] == {"Cannot update events for a published task": 1}
    allowed = dict(scalar(task, "m", "v", 0, 1.0), allow_locked=True)
    assert add_batch(client, allowed)["added"] == 1


def test_a_task_published_after_it_reported_refuses_events_at_once(client, task):
    assert add_batch(client, scalar(task, "m", "v", 0, 1.0))["added"] == 1  # the server now knows the task
    ok(client, "tasks.publish", {"task": task, "force": True})
    meta = fails(client, "events.add_batch", raw=lines(scalar(task, "m", "v", 1, 1.0)), code=400, subcode=131)
    assert meta["error_data"] == {"Cannot update events for a published task": 1}


def test_events_after_a_task_failed_are_still_stored(client, task):
    ok(client, "tasks.failed", {"task": task, "status_reason": "boom"})
    assert add_batch(client, scalar(task, "m", "v", 0, 1.0))["added"] == 1


def test_model_events_go_to_the_model_and_only_from_2_22(client, task):
    model = ok(client, "models.create", {"uri": "file:///m.pt", "name": "m", "task": task})["id"]
    event = dict(scalar(model, "loss", "train", 0, 3.0), model_event=True)
    assert add_batch(client, event)["added"] == 1
    data = ok(client, "events.scalar_metrics_iter_histogram", {"task": model, "model_events": True})
    assert data["loss"]["train"]["y"] == [3.0]
    fails(client, "events.scalar_metrics_iter_histogram", {"task": model}, code=400, subcode=101)
    meta = fails(client, "events.add_batch", raw=lines(event), version="2.20", code=400, subcode=131)
    assert meta["error_data"] == {"Invalid task id": 1}
    meta = fails(client, "events.add_batch", raw=lines(dict(event, task=task)), code=400, subcode=131)
    assert meta["error_data"] == {"Invalid model id": 1}


def test_a_key_that_cannot_write_gets_403(client, make_key, task):
    reader = make_key(["*"], "read")
    fails(
        client,
        "events.add_batch",
        raw=lines(scalar(task, "m", "v", 0, 1.0)),
        headers={"Authorization": f"Bearer {reader}"},
        code=403,
    )


def test_tasks_of_a_project_outside_the_key_are_invalid_ids(client, make_key):
    other = new_task(client, project="hidden-project")
    writer = make_key(["clearml-tests"], "write")
    meta = fails(
        client,
        "events.add_batch",
        raw=lines(scalar(other, "m", "v", 0, 1.0)),
        headers={"Authorization": f"Bearer {writer}"},
        code=400,
        subcode=131,
    )
    assert meta["error_data"] == {"Invalid task id": 1}


def test_a_debug_image_with_a_long_key_keeps_the_key_whole(client, task):
    event = dict(image(task, "img", "v", 0), key="k" * 400)
    add_batch(client, event)
    images = ok(client, "events.debug_images", {"task": task}, version="2.1")["images"]
    assert images[0]["key"] == "k" * 400


def test_a_plot_str_that_is_not_json_is_given_back_unchanged(client, task):
    add_batch(client, dict(plot(task, "p", "v", 0), plot_str="<not json>"))
    plots = ok(client, "events.get_task_plots", {"task": task})["plots"]
    assert plots[0]["plot_str"] == "<not json>"
