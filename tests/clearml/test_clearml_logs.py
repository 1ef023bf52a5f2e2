"""Console logs through the ClearML API: every get_task_log version, download, clear, delete."""

from __future__ import annotations

import orjson
import pytest
from clearml_support import BASE_TS, add_batch, call, fails, log, ok

from jobpulse.server import create_app


def _many_sharing_timestamps(client, task: str) -> list[str]:
    """60 lines over 4 timestamps (15 each) and 2 workers, sent in 3 batches; answers them in time order."""
    messages = []
    for batch in range(3):
        events = []
        for i in range(20):
            n = batch * 20 + i
            ts = BASE_TS + (n // 15) * 1000
            events.append(log(task, f"line {n:02d}", ts, worker="w0"))
            messages.append((ts, f"line {n:02d}"))
        add_batch(client, *events)
    return [m for _, m in sorted(messages)]


def _page_forward(client, task: str, size: int) -> list[str]:
    seen, start = [], None
    while True:
        body = {"task": task, "navigate_earlier": False, "batch_size": size}
        if start is not None:
            body["from_timestamp"] = start
        events = ok(client, "events.get_task_log", body)["events"]
        if not events:
            return seen
        seen += [e["msg"] for e in events]
        start = events[-1]["timestamp"]


def test_v29_paging_forward_never_skips_or_repeats_lines_sharing_a_timestamp(client, task):
    expected = _many_sharing_timestamps(client, task)
    assert _page_forward(client, task, 7) == expected


def test_v29_paging_earlier_returns_descending_pages_and_reaches_the_first_line(client, task):
    expected = _many_sharing_timestamps(client, task)
    seen, start = [], None
    while True:
        body = {"task": task, "batch_size": 4} | ({"from_timestamp": start} if start else {})
        data = ok(client, "events.get_task_log", body)
        assert data["total"] == 60
        if not data["events"]:
            break
        stamps = [e["timestamp"] for e in data["events"]]
        assert stamps == sorted(stamps, reverse=True)
        seen += [e["msg"] for e in data["events"]]
        start = data["events"][-1]["timestamp"]
    assert sorted(seen) == sorted(expected) and len(seen) == 60


def test_v29_order_reverses_a_page(client, task):
    for i in range(5):
        add_batch(client, log(task, f"m{i}", BASE_TS + i))
    latest_first = ok(client, "events.get_task_log", {"task": task, "batch_size": 3})["events"]
    assert [e["msg"] for e in latest_first] == ["m4", "m3", "m2"]
    ascending = ok(client, "events.get_task_log", {"task": task, "batch_size": 3, "order": "asc"})["events"]
    assert [e["msg"] for e in ascending] == ["m2", "m3", "m4"]
    later = {"task": task, "batch_size": 2, "navigate_earlier": False, "from_timestamp": BASE_TS + 1, "order": "desc"}
    assert [e["msg"] for e in ok(client, "events.get_task_log", later)["events"]] == ["m3", "m2"]


def test_log_events_have_clearml_fields(client, task):
    add_batch(client, log(task, "hello", BASE_TS, level="error", worker="node-1"))
    event = ok(client, "events.get_task_log", {"task": task})["events"][0]
    assert event == {
        "timestamp": BASE_TS,
        "type": "log",
        "task": task,
        "level": "error",
        "worker": "node-1",
        "msg": "hello",
        "metric": "",
        "variant": "",
    }


@pytest.mark.parametrize(
    ("version", "body", "scroll_order"),
    [
        ("1.5", {"order": "asc"}, "asc"),
        ("1.5", {"order": "desc"}, "desc"),
        ("1.7", {"from": "head", "order": "asc"}, "asc"),
        ("1.7", {"from": "tail", "order": "desc"}, "desc"),
    ],
)
def test_v1_scrolls_through_every_line_once(client, task, version, body, scroll_order):
    expected = _many_sharing_timestamps(client, task)
    if scroll_order == "desc":
        expected = expected[::-1]
    seen, scroll = [], None
    for _ in range(100):
        data = ok(
            client,
            "events.get_task_log",
            {"task": task, "batch_size": 8, **body, **({"scroll_id": scroll} if scroll else {})},
            version=version,
        )
        assert data["total"] == 60
        if not data["events"]:
            break
        seen += [e["msg"] for e in data["events"]]
        scroll = data["scroll_id"]
    assert seen == expected


def test_v17_from_tail_gives_each_page_in_the_requested_order(client, task):
    for i in range(6):
        add_batch(client, log(task, f"m{i}", BASE_TS + i))
    first = ok(
        client, "events.get_task_log", {"task": task, "from": "tail", "order": "asc", "batch_size": 3}, version="1.7"
    )
    assert [e["msg"] for e in first["events"]] == ["m3", "m4", "m5"]
    second = ok(
        client,
        "events.get_task_log",
        {"task": task, "scroll_id": first["scroll_id"], "order": "asc", "batch_size": 3},
        version="1.7",
    )
    assert [e["msg"] for e in second["events"]] == ["m0", "m1", "m2"]


def test_a_scroll_id_works_on_another_replica(client, task, store, settings):
    for i in range(4):
        add_batch(client, log(task, f"m{i}", BASE_TS + i))
    first = ok(client, "events.get_task_log", {"task": task, "batch_size": 2}, version="1.5")
    from starlette.testclient import TestClient

    replica = create_app(store, settings)
    with TestClient(replica, headers=dict(client.headers)) as other:
        second = ok(
            other,
            "events.get_task_log",
            {"task": task, "batch_size": 2, "scroll_id": first["scroll_id"]},
            version="1.5",
        )
    assert [e["msg"] for e in first["events"] + second["events"]] == ["m0", "m1", "m2", "m3"]


def test_a_scroll_id_of_another_task_is_refused(client, task):
    from clearml_support import new_task

    other = new_task(client, "other")
    scroll = ok(client, "events.get_task_log", {"task": other}, version="1.5")["scroll_id"]
    fails(client, "events.get_task_log", {"task": task, "scroll_id": scroll}, version="1.5", code=400, subcode=1104)


def test_download_as_json_lines(client, task):
    add_batch(client, log(task, "a", BASE_TS), log(task, "b", BASE_TS + 1, level="warning"))
    answer = client.post("/v2.23/events.download_task_log", json={"task": task})
    assert answer.status_code == 200 and f"task_{task}.log" in answer.headers["content-disposition"]
    rows = [orjson.loads(line) for line in answer.text.splitlines()]
    assert rows == [
        {"asctime": BASE_TS, "timestamp": BASE_TS, "level": "info", "worker": "w0", "msg": "a"},
        {"asctime": BASE_TS + 1, "timestamp": BASE_TS + 1, "level": "warning", "worker": "w0", "msg": "b"},
    ]


def test_download_as_text_with_a_line_format(client, task):
    add_batch(client, log(task, "a", 1_700_000_000_000 + 5))
    answer = client.post(
        "/v2.23/events.download_task_log",
        json={"task": task, "line_type": "text", "line_format": "{timestamp}|{level}|{msg}"},
    )
    assert answer.text == f"{1_700_000_000_000 + 5}|info|a\n"
    default = client.post("/v2.23/events.download_task_log", json={"task": task, "line_type": "text"})
    assert default.text == "2023-11-14T22:13:20.005Z w0 info a\n"


def test_download_refuses_unknown_placeholders(client, task):
    meta = fails(
        client,
        "events.download_task_log",
        {"task": task, "line_type": "text", "line_format": "{host}"},
        code=400,
        subcode=16,
    )
    assert meta["error_data"]["placeholders"] == ["host"]


def test_clear_task_log_keeps_the_lines_newer_than_the_threshold(client, task):
    from jobpulse.store.identity import now_ms

    now = now_ms()
    add_batch(
        client, log(task, "old", now - 3_600_000), log(task, "older", now - 7_200_000), log(task, "new", now - 1000)
    )
    assert ok(client, "events.clear_task_log", {"task": task, "threshold_sec": 60}) == {"deleted": 2}
    data = ok(client, "events.get_task_log", {"task": task})
    assert [e["msg"] for e in data["events"]] == ["new"] and data["total"] == 1
    workers = client.app.state.ctx.store.logs.workers(task)
    assert workers == [{"worker": "w0", "lines": 1, "bytes": 4}]
    assert ok(client, "events.clear_task_log", {"task": task}) == {"deleted": 1}


def test_delete_for_task_removes_every_event(client, task):
    from clearml_support import scalar

    add_batch(client, log(task, "x", BASE_TS), scalar(task, "m", "v", 0, 1.0))
    assert ok(client, "events.delete_for_task", {"task": task}) == {"deleted": 2}
    assert ok(client, "events.get_task_events", {"task": task})["total"] == 0
    assert ok(client, "tasks.get_by_id", {"task": task})["task"]["id"] == task


def test_deleting_events_of_a_published_task_needs_allow_locked(client, task):
    ok(client, "tasks.publish", {"task": task})
    fails(client, "events.delete_for_task", {"task": task}, code=400, subcode=110)
    assert ok(client, "events.delete_for_task", {"task": task, "allow_locked": True}) == {"deleted": 0}


def test_clear_scroll_accepts_any_scroll(client, task):
    assert ok(client, "events.clear_scroll", {"scroll_id": "anything"}) == {}
    fails(client, "events.clear_scroll", {}, code=400, subcode=11)


def test_version_below_2_9_ignores_navigate_earlier(client, task):
    for i in range(3):
        add_batch(client, log(task, f"m{i}", BASE_TS + i))
    _, meta, data = call(client, "events.get_task_log", {"task": task, "navigate_earlier": True}, version="1.7")
    assert meta["endpoint"]["actual_version"] == "1.7" and [e["msg"] for e in data["events"]] == ["m0", "m1", "m2"]


def test_delete_for_task_also_empties_the_chart_rollup(client, task):
    def ingest(value: float) -> None:
        series = {
            "kind": "scalar",
            "metric": "m",
            "variant": "v",
            "iter": list(range(20_000)),
            "ts": [BASE_TS + i for i in range(20_000)],
            "value": [value] * 20_000,
        }
        assert client.post("/jp/v1/ingest", json={"job": task, "series": [series]}).status_code == 200

    ingest(5.0)
    assert set(ok(client, "events.scalar_metrics_iter_histogram", {"task": task, "samples": 10})["m"]["v"]["y"]) == {
        5.0
    }
    ok(client, "events.delete_for_task", {"task": task})
    assert ok(client, "events.scalar_metrics_iter_histogram", {"task": task, "samples": 10}) == {}
    ingest(1.0)
    assert set(ok(client, "events.scalar_metrics_iter_histogram", {"task": task, "samples": 10})["m"]["v"]["y"]) == {
        1.0
    }
