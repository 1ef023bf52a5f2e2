"""Fuzzing every API family over the server's OpenAPI document: no request gets a 5xx.

Schemathesis generates requests for every operation of ``/openapi.json`` — native, ModelArts, PAI-DLC, Baseten
and ClearML — both fitting the document and not, and sends them to the real app over the real embedded engine.
Each request carries a valid credential in its family's place (native ``Authorization: Bearer``, ModelArts
``X-Auth-Token``, PAI ``Token``, Baseten ``Authorization: Api-Key``, ClearML the token of ``auth.login``, which
is itself called with Basic credentials), and most requests name the demo job, worker, project or task, so they
reach the routes' logic rather than stopping at a 401 or 404. The checks: no answer is a 5xx, and every answer
conforms to the document where it describes one (ClearML's ``{"meta", "data"}`` envelope, for instance).

The run is bounded and repeats exactly: a fixed number of examples per operation and kind (fitting / not
fitting), generated from a fixed seed (hypothesis' ``derandomize``). ``JOBPULSE_FUZZ_EXAMPLES`` sets that number
(default 16: about a minute for this file on two otherwise idle cores). A longer local run lifts the per-test time
limit too::

    JOBPULSE_FUZZ_EXAMPLES=300 .venv/bin/python -m pytest -q -p no:cacheprovider --timeout=0 tests/test_fuzz_api.py
"""

from __future__ import annotations

import base64
import json
import os
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import orjson
import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import response_schema_conformance
from starlette.testclient import TestClient

from helpers import NOW_MS, T0, post_columns, post_lines
from jobpulse.server import create_app
from jobpulse.settings import Settings
from jobpulse.store import Store

EXAMPLES = int(os.environ.get("JOBPULSE_FUZZ_EXAMPLES", "16"))
PROJECT = "fuzz"
JOB = "fuzz-job"
WORKER = "worker-0"
EVENT_TYPES = ("training_stats_scalar", "training_stats_vector", "plot", "training_debug_image", "log")
# ClearML calls that would take the demo task away from the calls after them: they get generated ids only
DESTRUCTIVE = ("delete", "reset", "clear_task_log", "archive", "publish")

FAMILIES: dict[str, Callable[[str], bool]] = {
    "modelarts": lambda path: path.startswith("/v2/"),
    "pai": lambda path: path.startswith("/api/v1/"),
    "baseten": lambda path: path.startswith("/v1/training_projects"),
    "clearml events": lambda path: path.startswith("/events."),
    "clearml": lambda path: "." in path.split("/")[1] and not path.startswith("/events."),
}
FAMILIES["native"] = lambda path: not any(ours(path) for name, ours in FAMILIES.items() if name != "native")


@schemathesis.serializer("application/x-ndjson")
def _json_lines(context: Any, value: Any) -> dict[str, bytes]:
    """A generated list of events as JSON lines, one a line; anything else as one line."""
    items = value if isinstance(value, list) else [value]
    return {"data": "\n".join(json.dumps(item) for item in items).encode()}


@dataclass
class World:
    """The app under test, its demo data and a valid credential of each API family."""

    app: Any
    token: str
    key_id: str
    clearml_token: str
    clearml_task: str
    clearml_project: str

    @property
    def basic(self) -> str:
        return base64.b64encode(f"{self.key_id}:{self.token}".encode()).decode()


def _demo_data(client: TestClient) -> None:
    """A job with scalars, system samples, logs, a vector, a plot, an image and a file."""
    ts = [NOW_MS - 60_000 + i for i in range(5)]
    scalars = {"kind": "scalar", "metric": "loss", "variant": "train", "iter": list(range(5)), "ts": ts}
    samples = {"kind": "system", "worker": WORKER, "metric": "gpu_util", "device": "0"}
    series = [
        {**scalars, "value": [1.0, 0.5, float("nan"), 0.25, 0.2]},
        {**samples, "ts": [T0 + i * 10_000 for i in range(5)], "value": [10.0, 20.0, 30.0, 40.0, 50.0]},
    ]
    assert post_columns(client, {"project": PROJECT, "job": JOB, "series": series}).status_code == 200
    answer = post_lines(
        client,
        {"kind": "log", "worker": WORKER, "ts": ts[0], "seq": 1, "level": "info", "msg": "hello"},
        {"kind": "log", "worker": WORKER, "ts": ts[1], "seq": 2, "level": "error", "msg": "trouble"},
        {"kind": "vector", "metric": "hist", "variant": "v", "iter": 1, "ts": ts[0], "values": [1, 2, 3]},
        {"kind": "plot", "metric": "roc", "variant": "v", "iter": 1, "ts": ts[0], "plot": {"data": [{"x": [1]}]}},
        {"kind": "image", "metric": "img", "variant": "v", "iter": 1, "ts": ts[0], "url": "/x.png", "key": "k"},
        project=PROJECT,
        job=JOB,
    )
    assert answer.json()["accepted"] == 5, answer.json()
    assert client.put(f"/jp/v1/jobs/{JOB}/files/report.txt", content=b"a file").status_code == 201


def _clearml(client: TestClient, endpoint: str, body: dict[str, Any], headers: dict[str, str]) -> dict[str, Any]:
    answer = client.post(f"/{endpoint}", content=orjson.dumps(body), headers=headers)
    assert answer.status_code == 200, answer.text
    return answer.json()["data"]


@pytest.fixture(scope="module")
def world(embedded_engine, tmp_path_factory) -> Iterator[World]:  # noqa: ANN001 - the session's EmbeddedEngine
    store = Store(embedded_engine, f"fuzz{os.getpid()}")
    key, token = store.keys.create("fuzz admin", ["*"], "admin")
    app = create_app(store, Settings(data_dir=tmp_path_factory.mktemp("fuzz"), write_credentials=False))
    with TestClient(app, headers={"Authorization": f"Bearer {token}"}) as client:
        _demo_data(client)
        partial = World(app, token, key.key_id, "", "", "")
        login = _clearml(client, "auth.login", {}, {"Authorization": f"Basic {partial.basic}"})
        headers = {"Authorization": f"Bearer {login['token']}", "Content-Type": "application/json"}
        project = _clearml(client, "projects.create", {"name": "fuzz clearml"}, headers)["id"]
        task = _clearml(client, "tasks.create", {"name": "fuzz task", "project": project, "type": "training"}, headers)
        _clearml(client, "tasks.started", {"task": task["id"]}, headers)
        yield World(app, token, key.key_id, login["token"], task["id"], project)


def _json(schema: dict[str, Any], media_type: str = "application/json") -> dict[str, Any]:
    return {"required": True, "content": {media_type: {"schema": schema}}}


_ANY = {}  # a field of any JSON value
_EVENT = {
    "type": "object",
    "properties": {
        "kind": {"enum": ["scalar", "system", "log", "vector", "plot", "image"]},
        **{name: _ANY for name in ("project", "job", "worker", "metric", "variant", "device", "iter", "ts", "seq")},
        **{name: _ANY for name in ("value", "values", "plot", "url", "key", "level", "msg")},
    },
}
_SERIES = {**_EVENT, "properties": {**_EVENT["properties"], "iter": {"type": "array"}, "ts": {"type": "array"}}}
# Bodies the routes read themselves where the document does not describe them (yet)
BODIES = {
    ("post", "/jp/v1/ingest"): {
        "required": True,
        "content": {
            "application/json": {
                "schema": {
                    "type": "object",
                    "properties": {"project": _ANY, "job": _ANY, "series": {"type": "array", "items": _SERIES}},
                }
            },
            "application/x-ndjson": {"schema": {"type": "array", "items": _EVENT}},
        },
    },
    ("post", "/jp/v1/keys"): _json(
        {"type": "object", "properties": {"name": _ANY, "projects": _ANY, "role": {"enum": ["read", "write", "admin"]}}}
    ),
    ("post", "/jp/v1/session"): _json(
        {"type": "object", "properties": {"api_key": {"type": "string"}, "next": {"type": "string"}}},
        "application/x-www-form-urlencoded",
    ),
    ("put", "/jp/v1/jobs/{job}/files/{name}"): _json(
        {"type": "string", "format": "binary"}, "application/octet-stream"
    ),
}


@pytest.fixture(scope="module")
def document(world: World) -> dict[str, Any]:
    """The OpenAPI document the server serves, with the bodies of ``BODIES`` where it leaves them out."""
    with TestClient(world.app) as client:
        answer = client.get("/openapi.json")
    assert answer.status_code == 200
    served = answer.json()
    for (method, path), body in BODIES.items():
        operation = served["paths"].get(path, {}).get(method)
        if operation is not None:
            operation.setdefault("requestBody", body)
    return served


@pytest.fixture(scope="module")
def api_schema(document: dict[str, Any], world: World) -> Any:
    loaded = schemathesis.openapi.from_dict(document)
    loaded.app = world.app
    return loaded


def _demo_wins(case: Any, name: str) -> bool:
    """Whether ``name`` gets the demo value in ``case``: for four generated cases in five, a choice fixed by
    what was generated, so a run repeats exactly."""
    generated = repr((case.path_parameters, case.query, case.body, name))
    return zlib.crc32(generated.encode()) % 5 != 0


def _aim(case: Any, world: World) -> dict[str, str]:
    """Point ``case`` at the demo data and give it its family's credential; answers the headers to send."""
    path, params = case.path, case.path_parameters or {}
    demo = {"job": JOB, "training_job_id": JOB, "JobId": JOB, "worker": WORKER, "task_id": WORKER}
    demo.update(project_id=PROJECT, training_project_id=PROJECT)
    if case.method.upper() != "DELETE":  # the demo job stays for the operations that follow
        for name in params.keys() & demo.keys():
            if _demo_wins(case, name):
                params[name] = demo[name]
    if FAMILIES["modelarts"](path):
        return {"X-Auth-Token": world.token}
    if FAMILIES["pai"](path):
        if _demo_wins(case, "Token"):
            case.query = {**(case.query or {}), "Token": world.token}
        return {}
    if FAMILIES["baseten"](path):
        return {"Authorization": f"Api-Key {world.token}"}
    if FAMILIES["native"](path):
        return {"Authorization": f"Bearer {world.token}"}
    if path == "/auth.login":
        return {"Authorization": f"Basic {world.basic}"}
    if not any(word in path for word in DESTRUCTIVE):
        _aim_clearml(case, world)
    return {"Authorization": f"Bearer {world.clearml_token}"}


def _aim_clearml(case: Any, world: World) -> None:
    """Name the demo task (and project, a name, a metric) in a ClearML body; an event gets one of the types."""
    events = case.body if isinstance(case.body, list) else [case.body]
    wins = {name: _demo_wins(case, name) for name in ("task", "tasks", "type", "project", "name", "metric")}
    for index, body in enumerate(events):
        if not isinstance(body, dict):
            continue
        if wins["task"]:
            body["task"] = world.clearml_task
        if case.path.startswith("/events.add"):
            if wins["type"]:
                body["type"] = EVENT_TYPES[(zlib.crc32(repr(body).encode()) + index) % len(EVENT_TYPES)]
            continue
        if wins["tasks"]:
            body["tasks"] = [world.clearml_task]
        if wins["project"]:
            body["project"] = world.clearml_project
        if wins["name"]:
            body["name"] = f"fuzz {zlib.crc32(repr(body).encode())}"
        if wins["metric"]:
            body["metric"] = "loss"


def _fuzz(operation: Any, mode: GenerationMode, world: World) -> str | None:
    """Send ``EXAMPLES`` generated requests of ``mode`` to ``operation``; answers what went wrong, if anything."""
    # a live follow never ends by itself: it is read for a moment, which is all the checks need
    timeout = 0.3 if operation.path.endswith("/follow") else 30

    @settings(
        max_examples=EXAMPLES,
        derandomize=True,
        deadline=None,
        database=None,
        phases=[Phase.explicit, Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(case=operation.as_strategy(generation_mode=mode))
    def send(case: Any) -> None:
        headers = _aim(case, world)
        checks = [not_a_server_error, response_schema_conformance]
        case.call_and_validate(headers=headers, checks=checks, timeout=timeout)

    try:
        send()
    except Unsatisfiable:  # nothing of the operation can be made not to fit (a path of free text, say)
        return None
    except Exception as exc:
        return f"{operation.label} ({mode.value}): {exc}"
    return None


def _checked(operation: Any) -> bool:
    """Whether the document constrains anything of ``operation`` that a request can break: a query or a body
    (a form is left out: one that does not fit the document cannot be written as a form)."""
    bodies = [body for body in operation.body if body.media_type != "application/x-www-form-urlencoded"]
    return bool(len(operation.query) or bodies)


def _operations(api_schema: Any, family: str) -> list[Any]:
    operations = [result.ok() for result in api_schema.get_all_operations()]
    return [operation for operation in operations if FAMILIES[family](operation.path)]


def test_every_api_family_and_clearml_endpoint_is_in_the_document(api_schema: Any, world: World) -> None:
    for family in FAMILIES:
        assert _operations(api_schema, family), family
    clearml = _operations(api_schema, "clearml") + _operations(api_schema, "clearml events")
    assert sorted(op.path[1:] for op in clearml) == world.app.state.clearml_registry.names()


@pytest.mark.parametrize("family", FAMILIES)
def test_no_generated_request_gets_a_server_error(family: str, api_schema: Any, world: World) -> None:
    failures = []
    for operation in _operations(api_schema, family):
        # a path of free text is all some operations take: nothing of theirs can be made not to fit
        modes = [GenerationMode.POSITIVE, GenerationMode.NEGATIVE] if _checked(operation) else [GenerationMode.POSITIVE]
        for mode in modes:
            failure = _fuzz(operation, mode, world)
            if failure:
                failures.append(failure)
    assert not failures, "\n\n".join(failures)
