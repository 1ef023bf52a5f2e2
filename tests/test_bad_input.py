"""Requests that once got a 5xx: each now gets a 4xx in its API family's error shape, and the server answers on.

Every test sends the exact request that failed, checks the refusal, then checks that the server still serves a
good request. One of them goes to a real server process, where a crash would show as a dead process.
"""

from __future__ import annotations

import httpx
import orjson
import pytest

from helpers import NOW_MS, T0, post_columns

DEEP = 100_000
BIG = "1" + "0" * 400  # an integer far beyond 64 bits (and beyond a double)


@pytest.fixture
def job(client) -> str:  # noqa: ANN001 - the admin TestClient
    """A job with a log line, a scalar and a system sample."""
    series = [
        {"kind": "log", "worker": "w0", "seq": [1], "ts": [NOW_MS], "level": "info", "msg": ["hello"]},
        {"kind": "scalar", "metric": "loss", "iter": [1], "ts": [NOW_MS], "value": [0.5]},
        {"kind": "system", "worker": "w0", "metric": "gpu_util", "device": "0", "ts": [T0], "value": [50.0]},
    ]
    assert post_columns(client, {"project": "proj", "job": "j1", "series": series}).status_code == 200
    return "j1"


def refused(answer: httpx.Response, field: str) -> dict:
    assert answer.status_code == 400, answer.text
    error = answer.json()["error"]
    assert error["code"] == "bad_request" and error["field"] == field, error
    return error


def still_answers(client, job: str) -> None:  # noqa: ANN001
    assert client.get(f"/jp/v1/jobs/{job}/logs").json()["lines"][0]["msg"] == "hello"


# -- native API -----------------------------------------------------------------------------------------------


def test_a_log_download_with_an_unknown_level_is_refused_before_the_download_starts(client, job):
    error = refused(client.get(f"/jp/v1/jobs/{job}/logs/download", params={"level": "bogus"}), "level")
    assert "bogus" in error["message"] and "critical" in error["message"]
    assert client.get(f"/jp/v1/jobs/{job}/logs/download").text.endswith("INFO hello\n")


def test_a_live_follow_from_a_cursor_with_an_unknown_level_is_refused_before_it_starts(client, job):
    cursor = client.get(f"/jp/v1/jobs/{job}/logs").json()["last_cursor"]
    answer = client.get(f"/jp/v1/jobs/{job}/logs/follow", params={"after": cursor, "level": "info,bogus"})
    refused(answer, "level")
    still_answers(client, job)


@pytest.mark.parametrize("since", ["9" * 5000, "9" * 30, "-1"])
def test_a_log_range_outside_the_calendar_is_refused(client, job, since):
    refused(client.get(f"/jp/v1/jobs/{job}/logs", params={"since": since}), "since")
    still_answers(client, job)


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"start": "9" * 30, "end": "9" * 30}, "start"),
        ({"start": "9" * 5000}, "start"),
        ({"end": "-5"}, "end"),
        ({"step": "9" * 30}, "step"),
        ({"step": "9" * 5000 + "d"}, "step"),
    ],
)
def test_a_system_series_range_or_step_beyond_the_calendar_is_refused(client, job, params, field):
    answer = client.get(f"/jp/v1/jobs/{job}/system/series", params={"metric": "gpu_util", **params})
    refused(answer, field)
    assert client.get(f"/jp/v1/jobs/{job}/system/series", params={"metric": "gpu_util"}).status_code == 200


@pytest.mark.parametrize("axis", ["iter", "time"])
def test_a_chart_range_beyond_any_stored_point_is_refused(client, job, axis):
    params = {"metric": "loss", "axis": axis, "x_min": -(2**63) + 1, "x_max": 2**63 - 1}
    refused(client.get(f"/jp/v1/jobs/{job}/scalars/chart", params=params), "x_min")
    assert client.get(f"/jp/v1/jobs/{job}/scalars/chart", params={"metric": "loss"}).json()["series"]


@pytest.mark.parametrize("last", ["9" * 30, "0", "-5"])
def test_a_count_of_latest_iterations_that_is_not_positive_or_too_large_is_refused(client, job, last):
    refused(client.get(f"/jp/v1/jobs/{job}/events/plot", params={"last": last}), "last")
    assert client.get(f"/jp/v1/jobs/{job}/events/plot", params={"last": 1}).status_code == 200


def test_a_job_config_nested_deeper_than_the_limit_is_refused(client, job):
    config = b'{"a": ' + b"[" * 300 + b"]" * 300 + b"}"
    body = b'{"job": "deep", "project": "proj", "config": ' + config + b"}"
    refused(client.post("/jp/v1/jobs", content=body), "body")
    refused(client.patch(f"/jp/v1/jobs/{job}", content=b'{"config": ' + config + b"}"), "body")
    assert client.get("/jp/v1/jobs/deep").status_code == 404
    still_answers(client, job)


def test_a_worker_exit_code_beyond_32_bits_is_refused(client, job):
    refused(client.put(f"/jp/v1/jobs/{job}/workers/w0", content=b'{"exit_code": 4294967296}'), "exit_code")
    assert client.put(f"/jp/v1/jobs/{job}/workers/w0", content=b'{"exit_code": -1}').json()["worker"]["exit_code"] == -1


# -- compatible APIs --------------------------------------------------------------------------------------------


def test_a_pai_start_time_of_thousands_of_digits_is_an_invalid_parameter(client, job):
    params = {"MetricType": "GpuCoreUsage", "StartTime": "9" * 5000}
    answer = client.get(f"/api/v1/jobs/{job}/metrics", params=params)
    assert answer.status_code == 400 and answer.json()["Code"] == "InvalidParameter"
    assert client.get(f"/api/v1/jobs/{job}/metrics", params={"MetricType": "GpuCoreUsage"}).status_code == 200


def _clearml_task(client) -> str:  # noqa: ANN001
    def ok(endpoint: str, body: dict) -> dict:
        answer = client.post(f"/v2.23/{endpoint}", content=orjson.dumps(body))
        assert answer.status_code == 200, answer.text
        return answer.json()["data"]

    project = ok("projects.create", {"name": "bad input"})["id"]
    task = ok("tasks.create", {"name": "t", "project": project, "type": "training"})["id"]
    ok("tasks.started", {"task": task})
    return task


def clearml_refused(answer: httpx.Response, subcode: int) -> dict:
    assert answer.status_code == 400, answer.text
    meta = answer.json()["meta"]
    assert (meta["result_code"], meta["result_subcode"]) == (400, subcode), meta
    assert answer.json()["data"] == {}
    return meta


def clearml_still_answers(client, task: str) -> None:  # noqa: ANN001
    line = {"type": "log", "task": task, "msg": "still here", "timestamp": NOW_MS}
    answer = client.post("/v2.23/events.add", content=orjson.dumps(line))
    assert answer.status_code == 200 and answer.json()["data"]["added"] == 1, answer.text


def test_a_clearml_plot_nested_a_hundred_thousand_levels_is_refused(client):
    task = _clearml_task(client)
    plot = {"type": "plot", "task": task, "metric": "m", "variant": "v", "iter": 1, "plot_str": "[" * DEEP + "]" * DEEP}
    meta = clearml_refused(client.post("/v2.23/events.add", content=orjson.dumps(plot)), 131)
    assert meta["error_data"] == {"Plot is nested deeper than 64 levels": 1}
    clearml_still_answers(client, task)


def test_a_clearml_body_nested_a_hundred_thousand_levels_with_a_nan_is_refused(client):
    """``NaN`` sends the body to Python's own JSON parser, which recurses once per level."""
    task = _clearml_task(client)
    deep = ("[" * DEEP + "]" * DEEP).encode()
    body = b'{"type": "plot", "task": "%s", "metric": "m", "value": NaN, "extra": %s}' % (task.encode(), deep)
    meta = clearml_refused(client.post("/v2.23/events.add", content=body), 12)
    assert "nest 100001 levels deep" in meta["result_msg"]  # the body's own object, and the array
    clearml_still_answers(client, task)


def test_a_clearml_batch_line_nested_too_deeply_is_counted_and_the_good_line_stored(client):
    task = _clearml_task(client)
    good = orjson.dumps({"type": "log", "task": task, "msg": "good", "timestamp": NOW_MS})
    deep = b'{"type": "log", "task": "%s", "msg": NaN, "x": %s}' % (task.encode(), b"[" * DEEP + b"]" * DEEP)
    answer = client.post("/v2.23/events.add_batch", content=good + b"\n" + deep)
    assert answer.status_code == 200, answer.text
    assert answer.json()["data"] == {
        "added": 1,
        "errors": 1,
        "errors_info": {"Event is nested deeper than 64 levels": 1},
    }


@pytest.mark.parametrize(
    "field",
    ['"value": ' + BIG, '"timestamp": ' + BIG, '"values": [' + BIG + "]", '"msg": "\\ud800"', '"metric": "a\\udfff"'],
)
def test_a_clearml_event_with_an_integer_beyond_64_bits_or_a_lone_surrogate_is_refused(client, field):
    task = _clearml_task(client)
    body = f'{{"type": "training_stats_scalar", "task": "{task}", "metric": "m", "iter": 1, {field}}}'
    meta = clearml_refused(client.post("/v2.23/events.add", content=body.encode()), 12)
    assert "integer beyond 64 bits or a lone surrogate" in meta["result_msg"]
    answer = client.post("/v2.23/events.add_batch", content=body.encode())
    meta = clearml_refused(answer, 131)
    assert meta["error_data"] == {"Event holds an integer beyond 64 bits or a lone surrogate": 1}
    clearml_still_answers(client, task)


@pytest.mark.parametrize("task", [[1], {"id": 1}, 7])
def test_a_clearml_event_whose_task_is_not_a_string_is_an_invalid_task(client, task):
    scalar = {"type": "training_stats_scalar", "task": task, "metric": "m", "iter": 1, "value": 1.0}
    meta = clearml_refused(client.post("/v2.23/events.add", content=orjson.dumps(scalar)), 131)
    assert meta["error_data"] == {"Invalid task id": 1}
    clearml_still_answers(client, _clearml_task(client))


@pytest.mark.e2e
def test_a_real_server_answers_a_deeply_nested_clearml_body_and_stays_up(server):
    headers = {"Authorization": f"Bearer {server.api_key}"}
    deep = b"[" * DEEP + b"]" * DEEP
    body = b'{"type": "plot", "task": "t", "metric": "m", "value": NaN, "plot_str": "x", "extra": %s}' % deep
    answer = httpx.post(f"{server.url}/v2.23/events.add", content=body, headers=headers, timeout=60)
    assert answer.status_code == 400 and answer.json()["meta"]["result_subcode"] == 12
    assert httpx.get(f"{server.url}/jp/v1/server", headers=headers, timeout=30).status_code == 200
