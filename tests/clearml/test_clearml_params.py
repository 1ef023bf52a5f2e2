"""The documented parameters not covered elsewhere: model_events on every reader, allow_locked on every writer,
and the remaining sample, plot and histogram options."""

from __future__ import annotations

import pytest
from clearml_support import BASE_TS, add_batch, fails, image, log, new_task, ok, plot, scalar

from jobpulse.ingest.parse import ITER_MIN


@pytest.fixture
def model(client, task) -> str:
    mid = ok(client, "models.create", {"uri": "file:///m.pt", "name": "m", "task": task})["id"]
    events = [scalar(mid, "loss", "v", i, float(i)) for i in range(3)]
    events += [scalar(mid, "Summary", "acc", ITER_MIN, 0.7), plot(mid, "roc", "v", 1), image(mid, "img", "v", 2)]
    events += [
        {
            "type": "training_stats_vector",
            "task": mid,
            "metric": "vec",
            "variant": "v",
            "iter": 0,
            "values": [1.0],
            "timestamp": BASE_TS,
        }
    ]
    add_batch(client, *[dict(e, model_event=True) for e in events])
    return mid


MODEL_READS = [
    ("events.get_task_metrics", {"tasks": ["{id}"]}),
    ("events.get_task_events", {"task": "{id}"}),
    ("events.get_scalar_metrics_and_variants", {"task": "{id}"}),
    ("events.get_vector_metrics_and_variants", {"task": "{id}"}),
    ("events.vector_metrics_iter_histogram", {"task": "{id}", "metric": "vec", "variant": "v"}),
    ("events.scalar_metrics_iter_histogram", {"task": "{id}"}),
    ("events.multi_task_scalar_metrics_iter_histogram", {"tasks": ["{id}"]}),
    ("events.get_task_single_value_metrics", {"tasks": ["{id}"]}),
    ("events.get_scalar_metric_data", {"task": "{id}", "metric": "loss"}),
    ("events.scalar_metrics_iter_raw", {"task": "{id}", "metric": {"metric": "loss"}}),
    ("events.get_task_plots", {"task": "{id}"}),
    ("events.get_multi_task_plots", {"tasks": ["{id}"]}),
    ("events.plots", {"metrics": [{"task": "{id}", "metric": "roc"}]}),
    ("events.debug_images", {"metrics": [{"task": "{id}", "metric": "img"}]}),
    ("events.get_debug_image_sample", {"task": "{id}", "metric": "img", "variant": "v"}),
    ("events.get_plot_sample", {"task": "{id}", "metric": "roc"}),
]


def _fill(body: dict, value: str) -> dict:
    def one(v):  # noqa: ANN001, ANN202
        if v == "{id}":
            return value
        if isinstance(v, list):
            return [one(x) for x in v]
        if isinstance(v, dict):
            return {k: one(x) for k, x in v.items()}
        return v

    return one(body)


@pytest.mark.parametrize(("endpoint", "body"), MODEL_READS)
def test_model_events_read_a_models_events_and_only_with_the_flag(client, model, endpoint, body):
    data = ok(client, endpoint, dict(_fill(body, model), model_events=True))
    assert data and data != {"metrics": []}
    fails(client, endpoint, _fill(body, model), code=400, subcode=101)


def test_delete_for_model_honours_allow_locked(client, model):
    ok(client, "models.set_ready", {"model": model, "publish_task": True})
    fails(client, "events.delete_for_model", {"model": model}, code=400, subcode=110)
    assert ok(client, "events.delete_for_model", {"model": model, "allow_locked": True}) == {"deleted": 7}
    fails(client, "events.delete_for_model", {"model": "0" * 32}, code=400, subcode=201)


def test_clear_task_log_honours_allow_locked(client, task):
    add_batch(client, log(task, "x", BASE_TS))
    ok(client, "tasks.publish", {"task": task})
    fails(client, "events.clear_task_log", {"task": task}, code=400, subcode=110)
    assert ok(client, "events.clear_task_log", {"task": task, "allow_locked": True}) == {"deleted": 1}


def test_a_debug_image_sample_scroll_is_kept_unless_refreshed_or_an_iteration_is_asked(client, task):
    add_batch(client, *[image(task, "img", "v", it) for it in (0, 5)])
    first = ok(client, "events.get_debug_image_sample", {"task": task, "metric": "img", "variant": "v", "iteration": 0})
    again = ok(
        client,
        "events.get_debug_image_sample",
        {"task": task, "metric": "img", "variant": "v", "scroll_id": first["scroll_id"]},
    )
    assert again["event"]["iter"] == 0
    fresh = ok(
        client,
        "events.get_debug_image_sample",
        {"task": task, "metric": "img", "variant": "v", "scroll_id": first["scroll_id"], "refresh": True},
    )
    assert fresh["event"]["iter"] == 5


def test_a_plot_sample_at_an_iteration(client, task):
    add_batch(client, *[plot(task, "roc", v, it) for v in ("a", "b") for it in (1, 4, 9)])
    sample = ok(client, "events.get_plot_sample", {"task": task, "metric": "roc", "iteration": 5})
    assert [(e["variant"], e["iter"]) for e in sample["events"]] == [("a", 4), ("b", 4)]


def test_multi_task_plots_iters_and_no_scroll(client, task):
    add_batch(client, *[plot(task, "roc", "a", it) for it in range(3)])
    data = ok(client, "events.get_multi_task_plots", {"tasks": [task], "iters": 2, "no_scroll": True})
    assert sorted(data["plots"]["roc"]["a"][task]) == ["1", "2"] and data["scroll_id"] is None
    scrolled = ok(client, "events.get_multi_task_plots", {"tasks": [task]})
    assert scrolled["scroll_id"]
    rest = ok(client, "events.get_multi_task_plots", {"tasks": [task], "scroll_id": scrolled["scroll_id"]})
    assert rest["plots"] == {} and rest["returned"] == 0


def test_multi_task_histogram_over_time(client):
    first, second = new_task(client, "a"), new_task(client, "b")
    add_batch(client, scalar(first, "m", "v", 0, 1.0, ts=BASE_TS), scalar(second, "m", "v", 0, 2.0, ts=BASE_TS + 7))
    data = ok(
        client, "events.multi_task_scalar_metrics_iter_histogram", {"tasks": f"{first},{second}", "key": "timestamp"}
    )
    assert data["metrics"]["m"]["v"][first]["x"] == [BASE_TS]
    assert data["metrics"]["m"]["v"][second] == {"name": "b", "x": [BASE_TS + 7], "y": [2.0]}


def test_get_task_plots_scroll_is_past_the_end(client, task):
    add_batch(client, plot(task, "roc", "a", 0))
    first = ok(client, "events.get_task_plots", {"task": task})
    assert first["returned"] == 1
    assert ok(client, "events.get_task_plots", {"task": task, "scroll_id": first["scroll_id"]})["plots"] == []


def test_legacy_debug_images_scroll_is_past_the_end(client, task):
    add_batch(client, image(task, "img", "v", 0))
    first = ok(client, "events.debug_images", {"task": task}, version="2.1")
    assert first["returned"] == 1
    rest = ok(client, "events.debug_images", {"task": task, "scroll_id": first["scroll_id"]}, version="2.1")
    assert rest["images"] == []
