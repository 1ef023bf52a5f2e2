"""PAI-DLC GetJobMetrics on a real server, checked field by field against the document."""

from __future__ import annotations

import re
import time
from urllib.parse import urlencode

import pytest
from compat_data import DLC_JOB, MINUTE, T0

PODS = [f"{DLC_JOB}-worker-{w}" for w in range(3)]


def iso(ms: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ms / 1000))


def get_metrics(dataset, headers: dict | None = None, **params) -> dict:
    if headers is None:
        params["Token"] = dataset.key
    status, _, body = dataset.http.call(
        "GET", f"/api/v1/jobs/{DLC_JOB}/metrics?{urlencode(params)}", headers=headers or {}
    )
    assert status == 200, body
    return body


def test_document_example_request_answers_every_pod_at_five_minute_steps_over_the_last_hour(dataset):
    before = int(time.time() * 1000)
    body = get_metrics(dataset, MetricType="GpuMemoryUsage")  # the document's example MetricType
    after = int(time.time() * 1000)
    assert list(body) == ["JobId", "PodMetrics", "RequestId"]
    assert body["JobId"] == DLC_JOB
    assert re.fullmatch(r"[0-9A-F]{8}-[0-9A-F]{4}-[0-9A-F]{4}-[0-9A-F]{4}-[0-9A-F]{12}", body["RequestId"])
    assert [pod["PodId"] for pod in body["PodMetrics"]] == PODS  # one per pod, named as in the example
    step = 5 * MINUTE  # the default TimeStep
    for pod, worker in zip(body["PodMetrics"], ("worker-0", "worker-1", "worker-2"), strict=True):
        assert list(pod) == ["PodId", "Metrics"]
        points = pod["Metrics"]
        for point in points:
            assert list(point) == ["Time", "Value"]
            assert isinstance(point["Time"], int) and isinstance(point["Value"], float)
        times = [p["Time"] for p in points]
        assert all(b - a == step for a, b in zip(times, times[1:], strict=False))  # one point per step
        if worker == "worker-2":
            assert points == []  # a CPU-only pod has no GPU memory samples
            continue
        origin = times[0] % step
        assert before - 3_600_000 - MINUTE <= times[0] and times[-1] <= after  # the hour before now
        expected = dataset.bucket_means(DLC_JOB, worker, "gpu_mem_util", origin, step)
        assert {p["Time"]: p["Value"] for p in points} == pytest.approx(expected)  # %, mean over the pod's GPUs


def test_explicit_range_and_step_answer_one_mean_per_step(dataset):
    body = get_metrics(
        dataset, MetricType="CpuCoreUsage", StartTime=iso(T0), EndTime=iso(T0 + 14 * MINUTE), TimeStep="1m"
    )
    for pod, worker in zip(body["PodMetrics"], ("worker-0", "worker-1", "worker-2"), strict=True):
        expected = dataset.bucket_means(DLC_JOB, worker, "cpu_util", T0, MINUTE)
        assert [p["Time"] for p in pod["Metrics"]] == [T0 + m * MINUTE for m in range(15)]
        assert [p["Value"] for p in pod["Metrics"]] == pytest.approx([expected[T0 + m * MINUTE] for m in range(15)])


def test_rates_are_bytes_per_second_and_a_bare_time_step_counts_minutes(dataset):
    body = get_metrics(
        dataset, MetricType="NetworkInputRate", StartTime=iso(T0), EndTime=iso(T0 + 20 * MINUTE), TimeStep="2"
    )
    pod = body["PodMetrics"][1]
    expected = dataset.bucket_means(DLC_JOB, "worker-1", "net_rx_Bps", T0, 2 * MINUTE)
    assert {p["Time"]: p["Value"] for p in pod["Metrics"]} == pytest.approx(expected)
    assert pod["Metrics"][0]["Value"] == 2e6 + 2500  # worker-1 receives 2 MB/s (+ 1000 B/s per sample index)


def test_seconds_steps_and_an_authorization_header_work_too(dataset):
    body = get_metrics(
        dataset,
        headers={"Authorization": f"Bearer {dataset.key}"},
        MetricType="GpuCoreUsage",
        StartTime=iso(T0),
        EndTime=iso(T0 + 2 * MINUTE),
        TimeStep="30s",
    )
    pod = body["PodMetrics"][0]
    expected = dataset.bucket_means(DLC_JOB, "worker-0", "gpu_util", T0, 30_000, end=T0 + 2 * MINUTE)
    assert {p["Time"]: p["Value"] for p in pod["Metrics"]} == pytest.approx(expected)
    assert len(pod["Metrics"]) == 5  # [T0, T0 + 2 min] at 30 s
