"""Every error of the vendor APIs, each in its vendor's shape: identity, credentials and bad input."""

from __future__ import annotations

import os
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass

import orjson
import pytest
from starlette.testclient import TestClient

from jobpulse.server import create_app
from jobpulse.settings import Settings
from jobpulse.store import Store

NOW = int(time.time() * 1000) - 120_000
WRONG_KEY = "jp_0123456789ab_" + "x" * 43


@dataclass
class World:
    client: TestClient
    admin: str
    other: str  # a key of project proj-b only


@pytest.fixture(scope="module")
def world(embedded_engine, tmp_path_factory) -> Iterator[World]:  # noqa: ANN001 - the session's engine
    store = Store(embedded_engine, f"compat_errors_{os.getpid()}")
    app = create_app(store, Settings(data_dir=tmp_path_factory.mktemp("compat"), write_credentials=False))
    admin = store.keys.create("admin", ["*"], "admin")[1]
    other = store.keys.create("reader of proj-b", ["proj-b"], "read")[1]
    with TestClient(app) as client:
        for project, job in (("proj-a", "job-a"), ("proj-b", "job-b")):
            body = {
                "project": project,
                "job": job,
                "series": [
                    {
                        "kind": "system",
                        "worker": "worker-0",
                        "metric": "cpu_util",
                        "ts": [NOW - 60_000, NOW],
                        "value": [1.0, 2.0],
                    },
                    {"kind": "log", "worker": "worker-0", "seq": [1], "ts": [NOW], "msg": ["hello"]},
                ],
            }
            answer = client.post(
                "/jp/v1/ingest",
                content=orjson.dumps(body),
                headers={"Authorization": f"Bearer {admin}", "Content-Type": "application/json"},
            )
            assert answer.status_code == 200, answer.text
        yield World(client=client, admin=admin, other=other)
    embedded_engine.command(f"DROP DATABASE IF EXISTS compat_errors_{os.getpid()}")


# (id, method, path, credential (admin, other, wrong or None), extra, status, vendor code, words in the message)
# fmt: off
MA = "/v2/proj-a/training-jobs/job-a"
MODELARTS = [
    ("no-token", "GET", f"{MA}/metrics/worker-0", None, {}, 401, "ModelArts.0201", "X-Auth-Token"),
    ("wrong-token", "GET", f"{MA}/metrics/worker-0", "wrong", {}, 401, "ModelArts.0204", "not valid"),
    ("other-project-key", "GET", f"{MA}/metrics/worker-0", "other", {}, 403, "ModelArts.0203", "proj-a"),
    ("missing-job", "GET", "/v2/proj-a/training-jobs/nope/metrics/worker-0", "admin", {}, 404, "ModelArts.0404",
     "'nope'"),
    ("job-of-other-project", "GET", "/v2/proj-a/training-jobs/job-b/metrics/worker-0", "admin", {}, 404,
     "ModelArts.0404", "'job-b' does not exist in project 'proj-a'"),
    ("missing-task", "GET", f"{MA}/metrics/worker-7", "admin", {}, 404, "ModelArts.0404", "task 'worker-7'"),
    ("missing-task-log", "GET", f"{MA}/tasks/worker-7/logs/preview", "admin", {}, 404, "ModelArts.0404",
     "task 'worker-7'"),
    ("bad-project-id", "GET", "/v2/proj_a/training-jobs/job-a/metrics/worker-0", "admin", {}, 400,
     "ModelArts.0104", "project_id"),
    ("long-project-id", "GET", f"/v2/{'p' * 65}/training-jobs/job-a/tasks/worker-0/logs/preview", "admin", {},
     400, "ModelArts.0104", "project_id"),
    ("bad-job-id", "GET", "/v2/proj-a/training-jobs/-job/metrics/worker-0", "admin", {}, 400, "ModelArts.0104",
     "training_job_id"),
    ("no-such-endpoint", "GET", f"{MA}/nothing", "admin", {}, 404, "ModelArts.0404", "endpoint"),
    ("wrong-method", "POST", f"{MA}/metrics/worker-0", "admin", {}, 405, "ModelArts.0405", ""),
]
PAI = "/api/v1/jobs/job-a/metrics"
PAI_CASES = [
    ("no-token", "GET", f"{PAI}?MetricType=GpuCoreUsage", None, {}, 401, "MissingToken", "Token"),
    ("wrong-token", "GET", f"{PAI}?MetricType=GpuCoreUsage", "wrong", {}, 401, "InvalidToken", "not valid"),
    ("basic-scheme", "GET", f"{PAI}?MetricType=GpuCoreUsage", "admin-basic", {}, 401, "InvalidToken", "Bearer"),
    ("other-project-key", "GET", f"{PAI}?MetricType=GpuCoreUsage", "other", {}, 404, "JobNotFound", "'job-a'"),
    ("missing-job", "GET", "/api/v1/jobs/nope/metrics?MetricType=GpuCoreUsage", "admin", {}, 404, "JobNotFound",
     "'nope'"),
    ("bad-job-id", "GET", "/api/v1/jobs/-x/metrics?MetricType=GpuCoreUsage", "admin", {}, 400,
     "InvalidParameter", "JobId"),
    ("no-metric-type", "GET", PAI, "admin", {}, 400, "MissingParameter", "MetricType"),
    ("bad-metric-type", "GET", f"{PAI}?MetricType=GpuTemp", "admin", {}, 400, "InvalidParameter",
     "MetricType 'GpuTemp'"),
    ("bad-start-time", "GET", f"{PAI}?MetricType=GpuCoreUsage&StartTime=yesterday", "admin", {}, 400,
     "InvalidParameter", "StartTime"),
    ("bad-end-time", "GET", f"{PAI}?MetricType=GpuCoreUsage&EndTime=2020-13-45T00:00:00Z", "admin", {}, 400,
     "InvalidParameter", "EndTime"),
    ("time-out-of-range", "GET", f"{PAI}?MetricType=GpuCoreUsage&StartTime=99999999999999999", "admin", {}, 400,
     "InvalidParameter", "StartTime"),
    ("start-after-end", "GET", f"{PAI}?MetricType=GpuCoreUsage&StartTime=2020-11-09T16:00:00Z"
     "&EndTime=2020-11-08T16:00:00Z", "admin", {}, 400, "InvalidParameter", "StartTime must not be after EndTime"),
    ("bad-time-step", "GET", f"{PAI}?MetricType=GpuCoreUsage&TimeStep=5x", "admin", {}, 400, "InvalidParameter",
     "TimeStep"),
    ("too-many-steps", "GET", f"{PAI}?MetricType=GpuCoreUsage&TimeStep=1s&StartTime=2020-11-01T00:00:00Z"
     "&EndTime=2020-11-09T00:00:00Z", "admin", {}, 400, "InvalidParameter", "TimeStep"),
    ("no-such-endpoint", "GET", "/api/v1/jobs/job-a/nothing", "admin", {}, 404, "InvalidAction.NotFound",
     "endpoint"),
]
BT = "/v1/training_projects/proj-a/jobs/job-a/metrics"
NULLS = orjson.dumps({"start_epoch_millis": None, "end_epoch_millis": None})
BASETEN = [
    ("no-key", "POST", BT, None, {"content": NULLS}, 401, None, "Api-Key"),
    ("basic-scheme", "POST", BT, "admin-basic", {"content": NULLS}, 401, None, "'Bearer <key>' or 'Api-Key <key>'"),
    ("wrong-key", "POST", BT, "wrong", {"content": NULLS}, 401, None, "not valid"),
    ("other-project-key", "POST", BT, "other", {"content": NULLS}, 403, None, "proj-a"),
    ("missing-job", "POST", "/v1/training_projects/proj-a/jobs/nope/metrics", "admin", {"content": NULLS}, 404,
     None, "'nope'"),
    ("job-of-other-project", "POST", "/v1/training_projects/proj-a/jobs/job-b/metrics", "admin",
     {"content": NULLS}, 404, None, "'job-b' does not exist in training project 'proj-a'"),
    ("bad-project-id", "POST", "/v1/training_projects/proj.a/jobs/job-a/metrics", "admin", {"content": NULLS},
     400, None, "training_project_id"),
    ("body-not-json", "POST", BT, "admin", {"content": b"{start"}, 400, None, "not valid JSON"),
    ("body-not-object", "POST", BT, "admin", {"content": b"[1, 2]"}, 400, None, "JSON object"),
    ("start-not-integer", "POST", BT, "admin", {"content": b'{"start_epoch_millis": "yesterday"}'}, 400, None,
     "start_epoch_millis"),
    ("start-out-of-range", "POST", BT, "admin", {"content": b'{"start_epoch_millis": 99999999999999999}'}, 400,
     None, "start_epoch_millis"),
    ("start-after-end", "POST", BT, "admin",
     {"content": b'{"start_epoch_millis": 1800000000000, "end_epoch_millis": 1700000000000}'}, 400, None,
     "start_epoch_millis must not be after end_epoch_millis"),
    ("no-such-endpoint", "POST", "/v1/training_projects/proj-a/jobs/job-a/nothing", "admin", {}, 404, None,
     "endpoint"),
    ("wrong-method", "PUT", BT, "admin", {}, 405, None, ""),
]
# fmt: on


def send(world: World, vendor: str, method: str, path: str, credential: str | None, extra: dict):
    tokens = {
        "admin": world.admin,
        "other": world.other,
        "wrong": WRONG_KEY,
        "admin-bearer": world.admin,
        "admin-basic": world.admin,
    }
    token = tokens.get(credential) if credential else None
    headers: dict[str, str] = {}
    if token is not None:
        if vendor == "modelarts":
            headers["X-Auth-Token"] = token
        elif credential == "admin-basic":
            headers["Authorization"] = f"Basic {token}"
        elif vendor == "pai":
            path += ("&" if "?" in path else "?") + f"Token={token}"
        elif credential == "admin-bearer":
            headers["Authorization"] = f"Bearer {token}"
        else:
            headers["Authorization"] = f"Api-Key {token}"
    return world.client.request(method, path, headers=headers, **extra)


@pytest.mark.parametrize(
    ("name", "method", "path", "credential", "extra", "status", "code", "words"),
    MODELARTS,
    ids=[case[0] for case in MODELARTS],
)
def test_modelarts_errors_are_huawei_error_code_and_message(
    world, name, method, path, credential, extra, status, code, words
):
    answer = send(world, "modelarts", method, path, credential, extra)
    assert answer.status_code == status, answer.text
    body = answer.json()
    assert list(body) == ["error_code", "error_msg"]
    assert body["error_code"] == code
    assert words in body["error_msg"] and body["error_msg"]


@pytest.mark.parametrize(
    ("name", "method", "path", "credential", "extra", "status", "code", "words"),
    PAI_CASES,
    ids=[case[0] for case in PAI_CASES],
)
def test_pai_errors_are_alibaba_cloud_request_host_code_message(
    world, name, method, path, credential, extra, status, code, words
):
    answer = send(world, "pai", method, path, credential, extra)
    assert answer.status_code == status, answer.text
    body = answer.json()
    assert list(body) == ["RequestId", "HostId", "Code", "Message"]
    assert re.fullmatch(r"[0-9A-F]{8}(-[0-9A-F]{4}){3}-[0-9A-F]{12}", body["RequestId"])
    assert body["HostId"] and body["Code"] == code
    assert words in body["Message"]


@pytest.mark.parametrize(
    ("name", "method", "path", "credential", "extra", "status", "code", "words"),
    BASETEN,
    ids=[case[0] for case in BASETEN],
)
def test_baseten_errors_are_a_detail_message(world, name, method, path, credential, extra, status, code, words):
    answer = send(world, "baseten", method, path, credential, extra)
    assert answer.status_code == status, answer.text
    body = answer.json()
    assert list(body) == ["detail"]
    assert isinstance(body["detail"], str) and body["detail"] and words in body["detail"]


def test_a_pai_request_id_is_new_for_every_error(world):
    first = send(world, "pai", "GET", PAI, "admin", {}).json()["RequestId"]
    second = send(world, "pai", "GET", PAI, "admin", {}).json()["RequestId"]
    assert first != second


def test_a_key_scoped_to_the_jobs_project_is_accepted_by_every_vendor(world):
    client = world.client
    reader = {"X-Auth-Token": world.other}
    assert client.get("/v2/proj-b/training-jobs/job-b/metrics/worker-0", headers=reader).status_code == 200
    assert client.get(f"/api/v1/jobs/job-b/metrics?MetricType=CpuCoreUsage&Token={world.other}").status_code == 200
    answer = client.post(
        "/v1/training_projects/proj-b/jobs/job-b/metrics",
        content=NULLS,
        headers={"Authorization": f"Api-Key {world.other}"},
    )
    assert answer.status_code == 200 and answer.json()["training_job"]["training_project_id"] == "proj-b"
