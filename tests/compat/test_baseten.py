"""Baseten training-job metrics on a real server, validated against the document's own response schema."""

from __future__ import annotations

import json
import re
import time
from datetime import datetime
from pathlib import Path

import orjson
import pytest
from compat_data import DLC_JOB, GIB, INSTANCE, MA_JOB, MINUTE, PROJECT, T0
from jsonschema import Draft202012Validator

SCHEMA = json.loads(
    (Path(__file__).parent / "data" / "baseten_get_training_job_metrics_response.schema.json").read_text()
)
VALIDATOR = Draft202012Validator(SCHEMA)
TOP = [
    "gpu_memory_usage_bytes",
    "gpu_utilization",
    "cpu_usage",
    "cpu_memory_usage_bytes",
    "ephemeral_storage",
    "training_job",
    "cache",
    "per_node_metrics",
]
NODE = TOP[:5]
ISO = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{3})?Z")
POINT = {"value": 123, "timestamp": "2023-11-07T05:31:56Z"}


def post(dataset, job: str, window: dict | None) -> dict:
    """The document's request: POST with the Api-Key scheme and a JSON body of the window."""
    status, _, body = dataset.http.call(
        "POST",
        f"/v1/training_projects/{PROJECT}/jobs/{job}/metrics",
        headers={"Authorization": f"Api-Key {dataset.key}", "Content-Type": "application/json"},
        body=orjson.dumps(window) if window is not None else None,
    )
    assert status == 200, body
    return body


def millis(text: str) -> int:
    assert ISO.fullmatch(text), text
    return int(datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp() * 1000)


def points(series: list[dict]) -> dict[int, float]:
    return {millis(p["timestamp"]): p["value"] for p in series}


def test_schema_accepts_the_documents_example_answer():
    storage = {"usage_bytes": [POINT], "utilization": [POINT]}
    example = {
        "gpu_memory_usage_bytes": {},
        "gpu_utilization": {},
        "cpu_usage": [POINT],
        "cpu_memory_usage_bytes": [POINT],
        "ephemeral_storage": storage,
        "cache": storage,
        "training_job": {
            "id": "<string>",
            "created_at": "2023-11-07T05:31:56Z",
            "current_status": "<string>",
            "error_message": "<string>",
            "updated_at": "2023-11-07T05:31:56Z",
            "instance_type": {
                "id": "<string>",
                "name": "<string>",
                "memory_limit_mib": 123,
                "millicpu_limit": 123,
                "gpu_count": 123,
                "gpu_type": "<string>",
                "gpu_memory_limit_mib": 123,
            },
            "training_project_id": "<string>",
            "training_project": {"id": "<string>", "name": "<string>"},
            "name": "gpt-oss-job",
        },
        "per_node_metrics": [
            {
                "node_id": "<string>",
                "metrics": {
                    "gpu_memory_usage_bytes": {},
                    "gpu_utilization": {},
                    "cpu_usage": [POINT],
                    "cpu_memory_usage_bytes": [POINT],
                    "ephemeral_storage": storage,
                },
            }
        ],
    }
    VALIDATOR.validate(example)
    assert not VALIDATOR.is_valid({**example, "cache": {"usage_bytes": [{"value": "1"}]}})


def test_document_example_request_answers_the_leaders_last_hour_and_every_node(dataset):
    before = int(time.time() * 1000)
    body = post(dataset, DLC_JOB, {"end_epoch_millis": None, "start_epoch_millis": None})  # the curl sample
    VALIDATOR.validate(body)
    assert list(body) == TOP
    # The job started 20 minutes ago, inside the default hour: one point a minute from its first minute.
    cpu = points(body["cpu_usage"])
    assert list(cpu) == [T0 + m * MINUTE for m in range(15)]
    assert max(cpu) <= before
    # The leader is worker-1, as the job says: its two GPU ranks, utilization as a fraction.
    assert list(body["gpu_utilization"]) == list(body["gpu_memory_usage_bytes"]) == ["0", "1"]
    for rank in ("0", "1"):
        expected = dataset.bucket_means(DLC_JOB, "worker-1", "gpu_util", T0, MINUTE, device=rank)
        assert points(body["gpu_utilization"][rank]) == pytest.approx({t: v / 100 for t, v in expected.items()})
        assert all(0 <= p["value"] <= 1 for p in body["gpu_utilization"][rank])
        expected = dataset.bucket_means(DLC_JOB, "worker-1", "gpu_mem_bytes", T0, MINUTE, device=rank)
        assert points(body["gpu_memory_usage_bytes"][rank]) == pytest.approx(expected)  # bytes
    assert cpu == pytest.approx(dataset.bucket_means(DLC_JOB, "worker-1", "cpu_cores", T0, MINUTE))  # cores
    assert points(body["cpu_memory_usage_bytes"]) == pytest.approx(
        dataset.bucket_means(DLC_JOB, "worker-1", "mem_bytes", T0, MINUTE)
    )
    assert points(body["cpu_memory_usage_bytes"])[T0] == 9 * GIB
    for name, usage, util in (
        ("ephemeral_storage", "ephemeral_bytes", "ephemeral_util"),
        ("cache", "cache_bytes", "cache_util"),
    ):
        assert list(body[name]) == ["usage_bytes", "utilization"]
        assert points(body[name]["usage_bytes"]) == pytest.approx(
            dataset.bucket_means(DLC_JOB, "worker-1", usage, T0, MINUTE)
        )
        assert points(body[name]["utilization"]) == pytest.approx(
            dataset.bucket_means(DLC_JOB, "worker-1", util, T0, MINUTE)
        )
    # Every node, each with its own metrics; the leader's are the top-level ones.
    nodes = body["per_node_metrics"]
    assert [n["node_id"] for n in nodes] == ["worker-0", "worker-1", "worker-2"]
    assert {n["node_id"]: list(n["metrics"]) for n in nodes} == {n["node_id"]: NODE for n in nodes}
    assert nodes[1]["metrics"] == {name: body[name] for name in NODE}
    assert nodes[2]["metrics"]["gpu_utilization"] == {}  # worker-2 has no GPU
    assert points(nodes[0]["metrics"]["cpu_usage"]) == pytest.approx(
        dataset.bucket_means(DLC_JOB, "worker-0", "cpu_cores", T0, MINUTE)
    )


def test_training_job_describes_the_job_its_instance_type_and_project(dataset):
    body = post(dataset, DLC_JOB, {"end_epoch_millis": None, "start_epoch_millis": None})
    job = body["training_job"]
    stored = dataset.jobs[DLC_JOB]
    assert job == {
        "id": DLC_JOB,
        "created_at": job["created_at"],
        "current_status": "TRAINING_JOB_RUNNING",
        "error_message": None,
        "instance_type": INSTANCE,
        "node_count": 3,
        "updated_at": job["updated_at"],
        "training_project_id": PROJECT,
        "training_project": {"id": PROJECT, "name": PROJECT},
        "name": f"{DLC_JOB} (compat tests)",
    }
    assert millis(job["created_at"]) == stored["created"]
    assert millis(job["updated_at"]) == stored["updated"]


def test_a_job_without_cache_answers_null_and_worker_0_leads_by_default(dataset):
    ended = dataset.jobs[MA_JOB]["ended"]
    body = post(dataset, MA_JOB, {"end_epoch_millis": None, "start_epoch_millis": None})
    VALIDATOR.validate(body)
    assert body["cache"] is None
    assert body["training_job"]["current_status"] == "TRAINING_JOB_COMPLETED"
    assert body["gpu_utilization"] == body["gpu_memory_usage_bytes"] == {}  # worker-0 has no GPU
    assert body["per_node_metrics"][0]["metrics"] == {name: body[name] for name in NODE}
    assert list(body["per_node_metrics"][1]["metrics"]["gpu_utilization"]) == ["0", "1"]
    assert body["training_job"]["instance_type"] == {
        "id": "",
        "name": "",
        "memory_limit_mib": 0,
        "millicpu_limit": 0,
        "gpu_count": 0,
        "gpu_type": None,
        "gpu_memory_limit_mib": None,
    }
    assert ended > T0


def test_an_explicit_window_answers_every_sample_of_it(dataset):
    window = {"start_epoch_millis": T0 + 3 * MINUTE, "end_epoch_millis": T0 + 8 * MINUTE}
    body = post(dataset, DLC_JOB, window)
    VALIDATOR.validate(body)
    step = 5_000  # five minutes cut into at most 120 round steps
    expected = dataset.bucket_means(
        DLC_JOB, "worker-1", "gpu_util", T0 + 3 * MINUTE, step, device="0", end=T0 + 8 * MINUTE
    )
    assert points(body["gpu_utilization"]["0"]) == pytest.approx({t: v / 100 for t, v in expected.items()})
    assert len(expected) == 31  # a sample every 10 s over [start, end]
