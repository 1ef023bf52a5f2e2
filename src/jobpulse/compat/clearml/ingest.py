"""``events.add`` / ``events.add_batch``: ClearML events into jobpulse's ingest.

Each event is checked as ClearML checks it, and every bad one is counted under a readable reason in
``errors_info``; the good events of the batch are stored. They are translated into jobpulse's own ingest
format (docs/ingest.md) and go through the same parser, job registration and group commit as the native
ingest: scalars and logs as columnar series, vectors, plots and debug images as JSON lines.

- ``training_stats_scalar`` -> scalar (metric, variant, iter, value, timestamp); ``training_stats_vector`` ->
  vector; ``plot`` -> plot (``plot_str``; a string that is not JSON is kept as a JSON string);
  ``training_debug_image`` -> image (url, key; a key longer than 255 characters is shortened with a hash and
  kept whole in the event's meta); ``log`` -> log line (level, worker, msg). A missing timestamp is the
  receive time, a missing worker the caller's ``X-ClearML-Worker``.
- A re-sent scalar, vector, plot or image replaces the stored one (same task, metric, variant, iter and key).
- Log events carry no sequence number, so one is made up that orders the lines of a worker that share a
  millisecond and makes a re-sent request store nothing twice: ``seq = d << 41 | i << 20 | h`` where ``i`` is
  the line's position among the request's lines of that task and worker (arrival order within a request),
  ``d`` the distance in ms from the line's timestamp to the request's latest line of that task and worker
  (a later request reaches further, so at an equal timestamp its lines sort after an earlier request's), and
  ``h`` 20 bits of the message's CRC-32 (so two different lines at the same timestamp and position of two
  requests never collide). A request sent again byte for byte gets the same numbers and is not stored twice.
  Only a line identical in timestamp, position, distance and text to one already stored is taken for a
  re-send.
"""

from __future__ import annotations

import json
import math
import re
import time
import zlib
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import orjson
import pyarrow as pa

from ...errors import Forbidden
from ...ingest import parse_body
from ...ingest.parse import ITER_MAX, ITER_MIN, MAX_NAME, MAX_PAYLOAD, TS_AHEAD, TS_MIN
from ...server.context import Context
from ...server.routes.ingest import resolve_jobs
from ...store import ApiKey, Job
from ...store.jobs import JOB_ID, WORKER_ID
from . import mapping

TYPES = {
    "training_stats_scalar": "scalar",
    "training_stats_vector": "vector",
    "plot": "plot",
    "training_debug_image": "image",
    "log": "log",
}
LEVELS = {
    "notset": "info",
    "debug": "debug",
    "verbose": "debug",
    "info": "info",
    "warn": "warning",
    "warning": "warning",
    "error": "error",
    "fatal": "critical",
    "critical": "critical",
}
MAX_URL = 2048
_BAD_WORKER = re.compile(r"[^A-Za-z0-9._:@/-]")
_NONFINITE = {math.inf: "Infinity", -math.inf: "-Infinity"}


class Bad(Exception):
    """One event is refused, for ``reason`` (the key it is counted under in ``errors_info``)."""

    def __init__(self, reason: str) -> None:
        self.reason = reason


@dataclass
class Prepared:
    """The good events of a request as jobpulse ingest tables, and the count of bad ones per reason."""

    tables: dict[str, pa.Table] = field(default_factory=dict)
    added: int = 0
    errors: Counter = field(default_factory=Counter)


def parse_lines(raw: bytes) -> list[Any]:
    """The events of a JSON-lines body (a JSON array is accepted too); a line that is not JSON stays a str."""
    stripped = raw.strip()
    if stripped.startswith(b"["):
        try:
            doc = _loads(stripped)
        except ValueError:
            doc = None
        if isinstance(doc, list):
            return doc
    events: list[Any] = []
    for line in raw.split(b"\n"):
        if not line.strip():
            continue
        try:
            events.append(_loads(line))
        except ValueError:
            events.append(line.decode("utf-8", "replace"))
    return events


def _loads(data: bytes) -> Any:
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        return json.loads(data)  # Python clients write NaN and Infinity as bare words


def worker_name(value: Any, default: str) -> str:
    if not isinstance(value, str) or not value:
        return default
    if WORKER_ID.match(value):
        return value
    return _BAD_WORKER.sub("_", value)[:128]


def _number(value: Any) -> float | str:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise Bad("Scalar event must have a numeric 'value'")
    value = float(value)
    if math.isfinite(value):
        return value
    return "NaN" if value != value else _NONFINITE[value]


class Translator:
    """Checks and translates the events of one request."""

    def __init__(self, ctx: Context, key: ApiKey, worker: str, *, model_events_allowed: bool) -> None:
        self.ctx = ctx
        self.key = key
        self.default_worker = worker_name(worker, "")
        self.model_events_allowed = model_events_allowed
        self.now = time.time_ns() // 1_000_000
        self.jobs: dict[str, Job] = {}
        self.plain_jobs: dict[str, Job] = {}
        self.scalars: dict[tuple, dict[str, list]] = {}
        self.logs: dict[tuple[str, str], list[tuple[int, str, str]]] = {}
        self.lines: list[dict[str, Any]] = []
        self.errors: Counter = Counter()
        self.accepted = 0

    def run(self, events: list[Any]) -> Prepared:
        self._load_jobs(events)
        fast = self._scalar
        for event in events:
            if fast(event):
                self.accepted += 1
                continue
            try:
                self._one(event)
                self.accepted += 1
            except Bad as bad:
                self.errors[bad.reason] += 1
        return self._tables()

    def _scalar(self, event: Any) -> bool:
        """The common case, a plain scalar of an unlocked task, checked and kept without detours; anything
        else (also every mistake) is left to :meth:`_one`, which says what is wrong."""
        if type(event) is not dict or event.get("type") != "training_stats_scalar" or event.get("model_event"):
            return False
        job = self.plain_jobs.get(event.get("task"))  # type: ignore[arg-type]
        metric, variant, iteration = event.get("metric"), event.get("variant", ""), event.get("iter")
        value, ts, worker = event.get("value"), event.get("timestamp"), event.get("worker")
        if (
            job is None
            or type(metric) is not str
            or not metric
            or len(metric) > MAX_NAME
            or type(variant) is not str
            or len(variant) > MAX_NAME
            or type(iteration) is not int
            or not ITER_MIN <= iteration <= ITER_MAX
        ):
            return False
        if type(value) is int:
            value = float(value)
        elif type(value) is not float or not math.isfinite(value):
            return False
        if ts is None and "ts" not in event:
            ts = self.now
        elif type(ts) is not int or not TS_MIN <= ts <= self.now + TS_AHEAD:
            return False
        if worker is None or type(worker) is not str:
            worker = self.default_worker
        elif not WORKER_ID.match(worker):
            return False
        group = self.scalars.get((job.job, job.project, metric, variant, worker, 0))
        if group is None:
            group = self.scalars[(job.job, job.project, metric, variant, worker, 0)] = {
                "iter": [],
                "ts": [],
                "value": [],
            }
        group["iter"].append(iteration)
        group["ts"].append(ts)
        group["value"].append(value)
        return True

    def _load_jobs(self, events: Iterable[Any]) -> None:
        ids = {e.get("task") for e in events if isinstance(e, dict)}
        ids = [i for i in ids if isinstance(i, str) and JOB_ID.match(i)]
        found = self.ctx.store.jobs.get_many(ids) if ids else {}
        self.jobs = {i: job for i, job in found.items() if self.key.allows_project(job.project)}
        self.plain_jobs = {i: job for i, job in self.jobs.items() if not job.locked and not mapping.is_model(job)}
        if self.jobs and not self.key.can("write"):
            raise Forbidden(f"this API key is '{self.key.role}'; adding events needs 'write'")

    def _one(self, event: Any) -> None:
        if not isinstance(event, dict):
            raise Bad("Event is not a JSON object")
        etype = event.get("type")
        if etype is None:
            raise Bad("Event must have a 'type' field")
        kind = TYPES.get(str(etype).replace(" ", "_"))
        if kind is None:
            raise Bad(f"Invalid event type {etype}")
        task = event.get("task")
        if task is None:
            raise Bad("Event must have a 'task' field")
        job = self.jobs.get(task) if isinstance(task, str) else None
        model = bool(event.get("model_event")) and self.model_events_allowed
        if job is None or mapping.is_model(job) != model:
            raise Bad("Invalid model id" if model else "Invalid task id")
        if model and kind == "log":
            raise Bad("Log events cannot be model events")
        if job.locked and not event.get("allow_locked"):
            raise Bad("Cannot update events for a published " + ("model" if model else "task"))
        ts = self._timestamp(event)
        worker = worker_name(event.get("worker"), self.default_worker)
        if kind == "log":
            self._log(job, event, ts, worker)
            return
        metric, variant, iteration = self._names(event)
        if kind == "scalar":
            value = _number(event.get("value"))
            group = self.scalars.setdefault(
                (job.job, job.project, metric, variant, worker, int(model)),
                {"iter": [], "ts": [], "value": []},
            )
            group["iter"].append(iteration)
            group["ts"].append(ts)
            group["value"].append(value)
            return
        line: dict[str, Any] = {
            "kind": kind,
            "job": job.job,
            "project": job.project,
            "metric": metric,
            "variant": variant,
            "iter": iteration,
            "ts": ts,
            "model_event": model,
        }
        if worker:
            line["worker"] = worker
        if kind == "vector":
            values = event.get("values", event.get("value"))
            if not isinstance(values, list) or not all(
                isinstance(v, (int, float)) and not isinstance(v, bool) for v in values
            ):
                raise Bad("Vector event must have 'values': a list of numbers")
            line["values"] = [v if math.isfinite(v) else _number(v) for v in values]
        elif kind == "plot":
            line["plot"] = self._plot(event.get("plot_str"))
        else:
            line.update(self._image(event, metric, variant, iteration))
        self.lines.append(line)

    def _timestamp(self, event: dict[str, Any]) -> int:
        value = event.get("timestamp", event.get("ts"))
        if value is None:
            return self.now
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise Bad("Invalid timestamp: must be epoch milliseconds")
        ts = int(value)
        if not TS_MIN <= ts <= self.now + TS_AHEAD:
            raise Bad("Invalid timestamp: must be between 2000-01-01 and a week from now")
        return ts

    def _names(self, event: dict[str, Any]) -> tuple[str, str, int]:
        metric = event.get("metric")
        variant = event.get("variant")
        variant = "" if variant is None else variant
        if not isinstance(metric, str) or not metric:
            raise Bad("Event must have a non-empty 'metric'")
        if not isinstance(variant, str):
            raise Bad("'variant' must be a string")
        if len(metric) > MAX_NAME or len(variant) > MAX_NAME:
            raise Bad(f"Metric and variant names are at most {MAX_NAME} characters")
        iteration = event.get("iter", 0)
        if iteration is None:
            iteration = 0
        if isinstance(iteration, float) and iteration.is_integer():
            iteration = int(iteration)
        if isinstance(iteration, str) and re.fullmatch(r"-?\d+", iteration.strip()):
            iteration = int(iteration)
        if not isinstance(iteration, int) or isinstance(iteration, bool):
            raise Bad("Invalid iteration: must be an integer")
        if not ITER_MIN <= iteration <= ITER_MAX:
            raise Bad(f"Iteration number must be between {ITER_MIN} and {ITER_MAX}")
        return metric, variant, iteration

    def _plot(self, plot_str: Any) -> str:
        if plot_str is None or plot_str == "":
            return "null"
        if not isinstance(plot_str, str):
            raise Bad("'plot_str' must be a string")
        if len(plot_str) > MAX_PAYLOAD:
            raise Bad(f"Plot is larger than {MAX_PAYLOAD} bytes")
        try:
            orjson.loads(plot_str)
            return plot_str
        except orjson.JSONDecodeError:
            return orjson.dumps(plot_str).decode()  # kept as a JSON string, given back unchanged

    def _image(self, event: dict[str, Any], metric: str, variant: str, iteration: int) -> dict[str, Any]:
        from .files import native_url

        url = event.get("url")
        if not isinstance(url, str) or not url or len(url) > MAX_URL:
            raise Bad(f"Debug image event must have 'url': a string of at most {MAX_URL} characters")
        key = event.get("key")
        if key is None or key == "":
            key = f"{metric}/{variant}/{iteration}"
        if not isinstance(key, str):
            raise Bad("'key' must be a string")
        meta: dict[str, Any] = {}
        if len(key) > MAX_NAME:
            meta["key"] = key
            key = (
                key[: MAX_NAME - 17] + "#" + zlib.crc32(key.encode()).to_bytes(4, "big").hex() + format(len(key), "08x")
            )
        native = native_url(url)
        if native:
            meta["file"] = native
        out: dict[str, Any] = {"url": url, "key": key}
        if meta:
            out["meta"] = meta
        return out

    def _log(self, job: Job, event: dict[str, Any], ts: int, worker: str) -> None:
        msg = event.get("msg")
        if msg is None:
            msg = ""
        if not isinstance(msg, str):
            raise Bad("Log event must have 'msg': a string")
        level = event.get("level")
        level = LEVELS.get(level.lower()) if isinstance(level, str) else ("info" if level is None else None)
        if level is None:
            raise Bad(f"Invalid log level {event.get('level')!r}")
        self.logs.setdefault((job.job, job.project, worker or "worker-0"), []).append((ts, level, msg))

    # -- output ------------------------------------------------------------------------------------------

    def _tables(self) -> Prepared:
        prepared = Prepared(errors=self.errors)
        series: list[dict[str, Any]] = []
        for (job, project, metric, variant, worker, model), cols in self.scalars.items():
            entry = {
                "kind": "scalar",
                "job": job,
                "project": project,
                "metric": metric,
                "variant": variant,
                "model_event": model,
                **cols,
            }
            if worker:
                entry["worker"] = worker
            series.append(entry)
        for (job, project, worker), lines in self.logs.items():
            series.append(
                {
                    "kind": "log",
                    "job": job,
                    "project": project,
                    "worker": worker,
                    "seq": log_seqs(lines),
                    "ts": [t for t, _, _ in lines],
                    "level": [lvl for _, lvl, _ in lines],
                    "msg": [m for _, _, m in lines],
                }
            )
        batches = []
        if series:
            body = orjson.dumps({"series": series})
            count = sum(len(s["ts"]) for s in series)
            batches.append(parse_body(body, "application/json", {}, max_events=count + 1, now_ms=self.now))
        if self.lines:
            body = b"\n".join(orjson.dumps(line) for line in self.lines)
            batches.append(
                parse_body(body, "application/x-ndjson", {}, max_events=len(self.lines) + 1, now_ms=self.now)
            )
        parts: dict[str, list[pa.Table]] = {}
        for batch in batches:
            resolve_jobs(self.ctx, self.key, batch)
            for reason, count in batch.errors.items():  # events this layer let through and the ingest refused
                detail = next((e["detail"] for e in batch.examples if e["reason"] == reason), reason)
                prepared.errors[detail] += count
            prepared.added += batch.accepted
            for name, table in batch.tables().items():
                parts.setdefault(name, []).append(table)
        prepared.tables = {name: pa.concat_tables(tables) for name, tables in parts.items()}
        return prepared


def log_seqs(lines: list[tuple[int, str, str]]) -> list[int]:
    """Sequence numbers for one request's lines of one task and worker (see the module's description)."""
    anchor = max(t for t, _, _ in lines)
    out = []
    for index, (ts, _, msg) in enumerate(lines):
        distance = min(anchor - ts, (1 << 22) - 1)
        out.append(distance << 41 | min(index, (1 << 21) - 1) << 20 | (zlib.crc32(msg.encode()) & 0xFFFFF))
    return out
