"""ModelArts task metrics and task log preview, on a real server, checked field by field against the documents."""

from __future__ import annotations

import time

from compat_data import DLC_JOB, MA_JOB, MINUTE, PREVIEW_LIMIT, PROJECT, T0

DOCUMENTED = ["cpuUsage", "memUsage", "gpuUtil", "gpuMemUsage", "npuUtil", "npuMemUsage"]


def metrics(dataset, job: str, task: str) -> dict:
    status, _, body = dataset.http.call(
        "GET", f"/v2/{PROJECT}/training-jobs/{job}/metrics/{task}", headers={"X-Auth-Token": dataset.key}
    )
    assert status == 200, body
    return body


def per_minute(dataset, job: str, task: str, metric: str, minutes: int) -> list[float]:
    """The documented answer computed from the samples: a mean per minute rounded to 3 decimals, else -1."""
    means = dataset.bucket_means(job, task, metric, T0, MINUTE)
    return [round(means[T0 + m * MINUTE], 3) if T0 + m * MINUTE in means else -1 for m in range(minutes)]


def test_document_example_request_answers_six_metrics_per_minute_with_minus_one_for_no_sample(dataset):
    body = metrics(dataset, MA_JOB, "worker-0")  # the document's example: a task of a job, worker-0
    ended = dataset.jobs[MA_JOB]["ended"]
    minutes = (ended - ended % MINUTE - T0) // MINUTE + 1  # the job's first minute to its last
    assert list(body) == ["metrics"]
    assert [m["metric"] for m in body["metrics"]] == DOCUMENTED
    for metric in body["metrics"]:
        assert list(metric) == ["metric", "value"]
        assert len(metric["value"]) == minutes
        assert all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in metric["value"])
    cpu, mem = body["metrics"][0]["value"], body["metrics"][1]["value"]
    assert cpu == per_minute(dataset, MA_JOB, "worker-0", "cpu_util", minutes)
    assert mem == per_minute(dataset, MA_JOB, "worker-0", "mem_util", minutes)
    assert cpu[:2] == [-1, -1] and cpu[7] == -1 and cpu[15:] == [-1] * (minutes - 15)  # late start, a gap
    assert cpu[2] == 10 + 2 + 2.5  # percent, as stored: the mean of the minute's six samples
    for metric in body["metrics"][2:]:  # a CPU-only task: every accelerator value is -1, as in the example
        assert metric["value"] == [-1] * minutes


def test_accelerator_metrics_average_all_devices_of_the_task(dataset):
    body = metrics(dataset, MA_JOB, "worker-1")
    values = {m["metric"]: m["value"] for m in body["metrics"]}
    minutes = len(values["gpuUtil"])
    assert values["gpuUtil"][:15] == [62.5 + m for m in range(15)]  # (52.5 + m + 72.5 + m) / 2
    assert values["gpuMemUsage"][:15] == [52.5] * 15
    assert values["gpuUtil"] == per_minute(dataset, MA_JOB, "worker-1", "gpu_util", minutes)
    assert values["cpuUsage"] == per_minute(dataset, MA_JOB, "worker-1", "cpu_util", minutes)
    assert values["npuUtil"] == values["npuMemUsage"] == [-1] * minutes


def test_a_running_job_runs_to_the_current_minute(dataset):
    before = int(time.time() * 1000)
    body = metrics(dataset, DLC_JOB, "worker-2")
    after = int(time.time() * 1000)
    counts = {len(m["value"]) for m in body["metrics"]}
    assert counts <= {(t - t % MINUTE - T0) // MINUTE + 1 for t in (before, after)} and len(counts) == 1
    cpu = body["metrics"][0]["value"]
    assert cpu[:15] == per_minute(dataset, DLC_JOB, "worker-2", "cpu_util", 15)
    assert set(cpu[15:]) <= {-1}


def preview(dataset, task: str) -> dict:
    status, _, body = dataset.http.call(
        "GET", f"/v2/{PROJECT}/training-jobs/{MA_JOB}/tasks/{task}/logs/preview", headers={"X-Auth-Token": dataset.key}
    )
    assert status == 200, body
    return body


def test_log_preview_of_a_log_within_the_limit_is_the_whole_log(dataset):
    body = preview(dataset, "worker-0")
    whole = "".join(line + "\n" for line in dataset.logs["worker-0"])
    assert list(body) == ["content", "current_size", "full_size"]
    assert body["content"] == whole
    assert body["current_size"] == body["full_size"] == len(whole.encode())
    assert isinstance(body["current_size"], int) and isinstance(body["full_size"], int)


def test_log_preview_of_a_larger_log_is_its_latest_whole_lines_within_5_mib(dataset):
    lines = dataset.logs["worker-1"]
    body = preview(dataset, "worker-1")
    content = body["content"]
    kept = content.split("\n")
    assert kept[-1] == "" and len(kept) > 1000  # every line ends with a newline
    kept = kept[:-1]
    assert kept == lines[-len(kept) :]  # the latest lines, cut at a line boundary
    assert body["current_size"] == len(content.encode()) <= PREVIEW_LIMIT
    assert body["current_size"] + len(lines[-len(kept) - 1].encode()) + 1 > PREVIEW_LIMIT  # no more would fit
    assert body["full_size"] == sum(len(line.encode()) + 1 for line in lines) > PREVIEW_LIMIT
