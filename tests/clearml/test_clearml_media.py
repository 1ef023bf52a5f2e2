"""Plots, debug images, sample navigation and every event of a task through the ClearML API."""

from __future__ import annotations

import orjson
from clearml_support import BASE_TS, add_batch, fails, image, log, new_task, ok, plot, scalar


def _images(client, task: str) -> None:
    add_batch(
        client,
        *[image(task, metric, variant, it) for metric in ("a", "b") for variant in ("x", "y") for it in (0, 10, 20)],
    )


def test_get_task_plots_gives_the_latest_iterations_of_each_plot(client, task):
    add_batch(client, *[plot(task, "roc", v, it) for v in ("a", "b") for it in range(4)])
    plots = ok(client, "events.get_task_plots", {"task": task, "iters": 2})["plots"]
    assert [(p["variant"], p["iter"]) for p in plots] == [("a", 3), ("b", 3), ("a", 2), ("b", 2)]
    assert orjson.loads(plots[0]["plot_str"]) == {"data": [{"x": [3], "y": [3]}]}
    assert plots[0]["type"] == "plot" and plots[0]["task"] == task


def test_get_task_plots_filters_metrics_from_2_14_and_has_no_scroll_from_2_16(client, task):
    add_batch(client, plot(task, "roc", "a", 0), plot(task, "pr", "a", 0))
    chosen = ok(client, "events.get_task_plots", {"task": task, "metrics": [{"metric": "pr"}], "no_scroll": True})
    assert [p["metric"] for p in chosen["plots"]] == ["pr"] and chosen["scroll_id"] is None
    older = ok(client, "events.get_task_plots", {"task": task, "metrics": [{"metric": "pr"}]}, version="2.13")
    assert sorted(p["metric"] for p in older["plots"]) == ["pr", "roc"] and older["scroll_id"]


def test_get_multi_task_plots_groups_by_metric_variant_task_and_iteration(client, task):
    other = new_task(client, "other")
    add_batch(client, plot(task, "roc", "a", 1), plot(other, "roc", "a", 2), plot(other, "roc", "a", 1))
    data = ok(client, "events.get_multi_task_plots", {"tasks": [task, other]})
    plots = data["plots"]["roc"]["a"]
    assert set(plots) == {task, other}
    name = ok(client, "tasks.get_by_id", {"task": task})["task"]["name"]
    assert plots[task]["1"]["name"] == name and plots[task]["1"]["plots"][0]["iter"] == 1
    assert list(plots[other]) == ["2"] and data["returned"] == 2


def test_debug_images_v21_gives_the_latest_iterations(client, task):
    _images(client, task)
    data = ok(client, "events.debug_images", {"task": task, "iters": 1}, version="2.1")
    assert data["task"] == task and data["returned"] == 4
    assert {(e["metric"], e["variant"], e["iter"]) for e in data["images"]} == {
        ("a", "x", 20),
        ("a", "y", 20),
        ("b", "x", 20),
        ("b", "y", 20),
    }


def test_debug_images_v27_pages_iterations_per_metric_with_a_scroll(client, task):
    _images(client, task)
    body = {"metrics": [{"task": task, "metric": "a"}], "iters": 2}
    first = ok(client, "events.debug_images", body)
    iterations = first["metrics"][0]["iterations"]
    assert first["metrics"][0]["task"] == task and [i["iter"] for i in iterations] == [20, 10]
    assert {e["variant"] for e in iterations[0]["events"]} == {"x", "y"}
    second = ok(client, "events.debug_images", dict(body, scroll_id=first["scroll_id"]))
    assert [i["iter"] for i in second["metrics"][0]["iterations"]] == [0]
    third = ok(client, "events.debug_images", dict(body, scroll_id=second["scroll_id"]))
    assert third["metrics"][0]["iterations"] == []
    back = ok(client, "events.debug_images", dict(body, scroll_id=third["scroll_id"], navigate_earlier=False))
    assert [i["iter"] for i in back["metrics"][0]["iterations"]] == [20, 10]
    fresh = ok(client, "events.debug_images", dict(body, scroll_id=third["scroll_id"], refresh=True))
    assert [i["iter"] for i in fresh["metrics"][0]["iterations"]] == [20, 10]


def test_debug_images_v214_filters_variants(client, task):
    _images(client, task)
    data = ok(client, "events.debug_images", {"metrics": [{"task": task, "metric": "b", "variants": ["y"]}]})
    events = data["metrics"][0]["iterations"][0]["events"]
    assert [(e["metric"], e["variant"], e["iter"]) for e in events] == [("b", "y", 20)]


def test_plots_v220_pages_iterations_like_debug_images(client, task):
    add_batch(client, *[plot(task, "roc", "v", it) for it in range(3)])
    first = ok(client, "events.plots", {"metrics": [{"task": task, "metric": "roc"}], "iters": 1})
    assert [i["iter"] for i in first["metrics"][0]["iterations"]] == [2]
    second = ok(
        client,
        "events.plots",
        {"metrics": [{"task": task, "metric": "roc"}], "iters": 1, "scroll_id": first["scroll_id"]},
    )
    assert [i["iter"] for i in second["metrics"][0]["iterations"]] == [1]


def test_debug_image_sample_and_navigation(client, task):
    _images(client, task)
    sample = ok(client, "events.get_debug_image_sample", {"task": task, "metric": "a", "variant": "y"})
    assert (sample["event"]["iter"], sample["min_iteration"], sample["max_iteration"]) == (20, 0, 20)
    at = ok(client, "events.get_debug_image_sample", {"task": task, "metric": "a", "variant": "y", "iteration": 15})
    assert at["event"]["iter"] == 10

    def step(scroll: str, **flags) -> dict:
        return ok(client, "events.next_debug_image_sample", {"task": task, "scroll_id": scroll, **flags})

    earlier = step(at["scroll_id"], navigate_earlier=True)
    assert (earlier["event"]["variant"], earlier["event"]["iter"]) == ("x", 10)
    earlier = step(earlier["scroll_id"], navigate_earlier=True)
    assert (earlier["event"]["variant"], earlier["event"]["iter"]) == ("y", 0)
    later = step(at["scroll_id"])
    assert (later["event"]["variant"], later["event"]["iter"]) == ("x", 20)
    jump = step(at["scroll_id"], next_iteration=True)
    assert (jump["event"]["variant"], jump["event"]["iter"]) == ("y", 20)
    past_the_last = step(jump["scroll_id"], next_iteration=True)
    assert past_the_last["event"] is None and past_the_last["scroll_id"] == jump["scroll_id"]


def test_debug_image_navigation_across_metrics(client, task):
    _images(client, task)
    sample = ok(
        client,
        "events.get_debug_image_sample",
        {"task": task, "metric": "a", "variant": "y", "navigate_current_metric": False},
    )
    nxt = ok(client, "events.next_debug_image_sample", {"task": task, "scroll_id": sample["scroll_id"]})
    assert (nxt["event"]["metric"], nxt["event"]["variant"], nxt["event"]["iter"]) == ("b", "x", 20)


def test_plot_sample_and_navigation(client, task):
    add_batch(client, *[plot(task, m, v, it) for m in ("p", "q") for v in ("a", "b") for it in (1, 2)])
    sample = ok(client, "events.get_plot_sample", {"task": task, "metric": "p", "navigate_current_metric": False})
    assert [(e["variant"], e["iter"]) for e in sample["events"]] == [("a", 2), ("b", 2)]
    assert (sample["min_iteration"], sample["max_iteration"]) == (1, 2)
    nxt = ok(client, "events.next_plot_sample", {"task": task, "scroll_id": sample["scroll_id"]})
    assert {(e["metric"], e["iter"]) for e in nxt["events"]} == {("q", 2)}
    back = ok(
        client, "events.next_plot_sample", {"task": task, "scroll_id": sample["scroll_id"], "navigate_earlier": True}
    )
    assert {(e["metric"], e["iter"]) for e in back["events"]} == {("q", 1)}
    same_metric = ok(client, "events.get_plot_sample", {"task": task, "metric": "p"})
    prev = ok(
        client,
        "events.next_plot_sample",
        {"task": task, "scroll_id": same_metric["scroll_id"], "navigate_earlier": True},
    )
    assert {(e["metric"], e["iter"]) for e in prev["events"]} == {("p", 1)}


def test_a_sample_scroll_of_another_kind_is_refused(client, task):
    add_batch(client, plot(task, "p", "a", 1))
    scroll = ok(client, "events.get_plot_sample", {"task": task, "metric": "p"})["scroll_id"]
    fails(client, "events.next_debug_image_sample", {"task": task, "scroll_id": scroll}, code=400, subcode=1104)


def test_get_task_events_pages_every_event_in_time_order_with_an_exact_total(client, task):
    events = [scalar(task, "m", "v", i, float(i), ts=BASE_TS + i // 4) for i in range(20)]
    events += [log(task, f"line {i}", BASE_TS + i // 4) for i in range(20)]
    events += [plot(task, "p", "v", i) for i in range(3)]
    add_batch(client, *events)
    seen, scroll = [], None
    while True:
        data = ok(
            client,
            "events.get_task_events",
            {"task": task, "batch_size": 7, **({"scroll_id": scroll} if scroll else {})},
        )
        assert data["total"] == 43
        if not data["events"]:
            break
        seen += data["events"]
        scroll = data["scroll_id"]
    assert len(seen) == 43
    stamps = [e["timestamp"] for e in seen]
    assert stamps == sorted(stamps)
    assert len({(e["type"], e.get("iter"), e.get("msg")) for e in seen}) == 43


def test_get_task_events_by_type_and_descending(client, task):
    add_batch(
        client, scalar(task, "m", "v", 0, 1.0, ts=BASE_TS), log(task, "a", BASE_TS + 1), log(task, "b", BASE_TS + 2)
    )
    data = ok(client, "events.get_task_events", {"task": task, "event_type": "log", "order": "desc"})
    assert [e["msg"] for e in data["events"]] == ["b", "a"] and data["total"] == 2
