"""The rules one event must meet, shared by the JSON-lines and the columnar forms (see docs/ingest.md)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..store.jobs import JOB_ID, PROJECT_ID, WORKER_ID
from ..store.logs import LEVELS

KINDS = ("scalar", "vector", "plot", "image", "log", "system")
MAX_NAME = 255
MAX_MSG = 1 << 20
MAX_PAYLOAD = 4 << 20
ITER_MIN, ITER_MAX = -(2**31), 2**53
TS_MIN = 946_684_800_000  # 2000-01-01
TS_AHEAD = 7 * 86_400_000
_LEVEL_ALIASES = {"warn": "warning", "fatal": "critical", "notset": "info", "trace": "debug", "err": "error"}


class _Reject(Exception):
    def __init__(self, reason: str, detail: str) -> None:
        self.reason, self.detail = reason, detail


def _identity(event: dict, defaults: dict) -> tuple[str, str | None]:
    job = event.get("job", defaults.get("job"))
    if not isinstance(job, str) or not JOB_ID.match(job):
        raise _Reject("invalid_job", f"'job' must be 1-128 letters, digits or '._:-', got {job!r}")
    project = event.get("project", defaults.get("project"))
    if project is not None and (not isinstance(project, str) or not PROJECT_ID.match(project)):
        raise _Reject("invalid_project", f"'project' must be 1-64 letters, digits or '-', got {project!r}")
    return job, project


def _worker(event: dict, defaults: dict, kind: str) -> str:
    worker = event.get("worker", defaults.get("worker"))
    if worker is None or worker == "":
        return "worker-0" if kind in ("log", "system") else ""
    if not isinstance(worker, str) or not WORKER_ID.match(worker):
        raise _Reject("invalid_worker", f"'worker' must be 1-128 of letters, digits or '._:@/-', got {worker!r}")
    return worker


def _name(event: dict, name: str, required: bool) -> str:
    value = event.get(name)
    if value is None and not required:
        return ""
    if not isinstance(value, str) or (required and not value) or len(value) > MAX_NAME:
        raise _Reject(f"invalid_{name}", f"'{name}' must be a non-empty string of at most {MAX_NAME} characters")
    return value


def _iter(value: Any) -> int:
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if not isinstance(value, int) or isinstance(value, bool):
        raise _Reject("invalid_iter", "'iter' must be an integer")
    if not ITER_MIN <= value <= ITER_MAX:
        raise _Reject("iter_out_of_range", f"'iter' must be in [{ITER_MIN}, {ITER_MAX}]")
    return value


def _ts(value: Any, now_ms: int) -> int:
    if value is None:
        return now_ms
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value:
        raise _Reject("invalid_ts", "'ts' must be epoch milliseconds")
    ts = int(value)
    if not TS_MIN <= ts <= now_ms + TS_AHEAD:
        raise _Reject("ts_out_of_range", "'ts' must be epoch milliseconds between 2000-01-01 and a week from now")
    return ts


_SPECIAL = {
    "NaN": float("nan"),
    "nan": float("nan"),
    "Infinity": float("inf"),
    "inf": float("inf"),
    "-Infinity": float("-inf"),
    "-inf": float("-inf"),
}


def _value(value: Any) -> float:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, str) and value in _SPECIAL:
        return _SPECIAL[value]
    raise _Reject("invalid_value", '\'value\' must be a number, or "NaN", "Infinity" or "-Infinity"')


def _level(value: Any) -> str:
    if value is None:
        return "info"
    if isinstance(value, str):
        level = value.lower()
        level = _LEVEL_ALIASES.get(level, level)
        if level in LEVELS:
            return level
    raise _Reject("invalid_level", f"'level' must be one of {', '.join(LEVELS)}")


def _floats(values: list) -> np.ndarray:
    try:
        return np.asarray([_SPECIAL.get(v, v) if isinstance(v, str) else v for v in values], dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise _Reject("invalid_values", 'values must be numbers or "NaN", "Infinity", "-Infinity"') from exc
