"""Calling the ClearML API of an in-process jobpulse app the way ClearML clients do."""

from __future__ import annotations

import time
from typing import Any

import orjson

NOW_MS = int(time.time() * 1000)
BASE_TS = NOW_MS - 3_600_000


def call(
    client: Any,
    endpoint: str,
    body: Any = None,
    *,
    version: str | None = "2.23",
    method: str = "POST",
    raw: bytes | None = None,
    headers: dict[str, str] | None = None,
) -> tuple[int, dict, Any]:
    """(HTTP status, meta, data) of one call; ``raw`` is sent as JSON lines instead of ``body``."""
    path = f"/v{version}/{endpoint}" if version else f"/{endpoint}"
    content = raw if raw is not None else (orjson.dumps(body) if body is not None else None)
    kind = "application/json-lines" if raw is not None else "application/json"
    answer = client.request(method, path, content=content, headers={"Content-Type": kind, **(headers or {})})
    doc = answer.json()
    assert set(doc) == {"meta", "data"}, doc
    return answer.status_code, doc["meta"], doc["data"]


def ok(client: Any, endpoint: str, body: Any = None, **kwargs: Any) -> Any:
    status, meta, data = call(client, endpoint, body, **kwargs)
    assert status == 200 and meta["result_code"] == 200, meta
    return data


def fails(
    client: Any, endpoint: str, body: Any = None, *, code: int, subcode: int | None = None, **kwargs: Any
) -> dict:
    status, meta, data = call(client, endpoint, body, **kwargs)
    assert status == code and meta["result_code"] == code, meta
    if subcode is not None:
        assert meta["result_subcode"] == subcode, meta
    assert meta["result_msg"] and data == {}
    return meta


def lines(*events: dict[str, Any]) -> bytes:
    return b"\n".join(orjson.dumps(e) for e in events)


def add_batch(client: Any, *events: dict[str, Any], version: str = "2.23") -> dict[str, Any]:
    return ok(client, "events.add_batch", raw=lines(*events), version=version)


def new_task(client: Any, name: str = "task", project: str = "clearml-tests") -> str:
    found = ok(client, "projects.get_all", {"name": f"^{project}$", "only_fields": ["id"]})["projects"]
    pid = found[0]["id"] if found else ok(client, "projects.create", {"name": project})["id"]
    task = ok(client, "tasks.create", {"name": name, "project": pid, "type": "training"})["id"]
    ok(client, "tasks.started", {"task": task})
    return task


def scalar(task: str, metric: str, variant: str, it: int, value: float, ts: int | None = None) -> dict[str, Any]:
    return {
        "type": "training_stats_scalar",
        "task": task,
        "metric": metric,
        "variant": variant,
        "iter": it,
        "value": value,
        "timestamp": BASE_TS + it if ts is None else ts,
    }


def log(task: str, msg: str, ts: int, level: str = "info", worker: str = "w0") -> dict[str, Any]:
    return {"type": "log", "task": task, "msg": msg, "timestamp": ts, "level": level, "worker": worker}


def plot(task: str, metric: str, variant: str, it: int, figure: Any = None) -> dict[str, Any]:
    return {
        "type": "plot",
        "task": task,
        "metric": metric,
        "variant": variant,
        "iter": it,
        "plot_str": orjson.dumps(figure or {"data": [{"x": [it], "y": [it]}]}).decode(),
        "timestamp": BASE_TS + it,
    }


def image(task: str, metric: str, variant: str, it: int) -> dict[str, Any]:
    return {
        "type": "training_debug_image",
        "task": task,
        "metric": metric,
        "variant": variant,
        "iter": it,
        "key": f"{metric}/{variant}/{it}.png",
        "url": f"http://files.example/{metric}/{variant}/{it}.png",
        "timestamp": BASE_TS + it,
    }
