"""``events.add`` / ``events.add_batch``: ClearML events into jobpulse's store.

Each event is checked as ClearML checks it (what its events document requires, and the bounds of jobpulse's
own ingest: names, iterations, timestamps, sizes), and every bad one is counted under a readable reason in
``errors_info``; the good events of the batch are stored. They become the rows the native ingest makes
(:mod:`.ingest_tables`) and go through the same job registration and group commit.

- ``training_stats_scalar`` -> scalar (metric, variant, iter, value, timestamp; ``x_axis_label`` names the
  series' x axis); ``training_stats_vector`` -> vector; ``plot`` -> plot (``plot_str``; a string that is not
  JSON is kept as a JSON string); ``training_debug_image`` -> image (url, which is optional, and key; a key
  longer than 255 characters is shortened with a hash and kept whole in the event's meta); ``log`` -> log
  line (level, worker, msg, and metric, variant and iter when it names them). A missing timestamp is the
  receive time, a missing worker the caller's ``X-ClearML-Worker``.
- A re-sent scalar, vector, plot or image replaces the stored one (same task, metric, variant, iter and key);
  a debug image also replaces the images of its series reported earlier under the same URL (store/events.py).
- Log events carry no sequence number: one is made up (``ingest_tables.log_seqs``), so that a re-sent request
  stores nothing twice.
"""

from __future__ import annotations

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
from ...ingest.parse import ITER_MAX, ITER_MIN, MAX_MSG, MAX_NAME, MAX_PAYLOAD, TS_AHEAD, TS_MIN
from ...server.context import Context
from ...server.routes.ingest import resolve_jobs
from ...store import ApiKey
from ...store.identity import JOB_ID, WORKER_ID
from . import jsontext
from .ingest_tables import Collected, LogLine, Series
from .known_tasks import KnownTasks, TaskInfo

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


class Bad(Exception):
    """One event is refused, for ``reason`` (the key it is counted under in ``errors_info``)."""

    def __init__(self, reason: str) -> None:
        self.reason = reason


@dataclass
class Prepared:
    """The good events of a request as the store's tables, the count of bad ones per reason, and the x-axis
    label each series was given (series -> label)."""

    tables: dict[str, pa.Table] = field(default_factory=dict)
    added: int = 0
    errors: Counter = field(default_factory=Counter)
    labels: dict[Series, str] = field(default_factory=dict)


def parse_lines(raw: bytes) -> list[Any]:
    """The events of a JSON-lines body (a JSON array is accepted too); a line that is not JSON stays a str, one
    the server does not take (nested too deeply, say) is the :class:`jsontext.Refused` that says why."""
    stripped = raw.strip()
    if stripped.startswith(b"["):
        try:
            doc = jsontext.loads(stripped)
        except ValueError:
            doc = None
        if isinstance(doc, list):
            return doc
    events: list[Any] = []
    for line in raw.split(b"\n"):
        if not line.strip():
            continue
        try:
            events.append(jsontext.loads(line))
        except jsontext.Refused as exc:
            events.append(exc)
        except ValueError:
            events.append(line.decode("utf-8", "replace"))
    return events


def worker_name(value: Any, default: str) -> str:
    if not isinstance(value, str) or not value:
        return default
    if WORKER_ID.match(value):
        return value
    return _BAD_WORKER.sub("_", value)[:128]


def _number(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise Bad("Scalar event must have a numeric 'value'")
    return float(value)


class Translator:
    """Checks and translates the events of one request."""

    def __init__(
        self, ctx: Context, key: ApiKey, worker: str, *, model_events_allowed: bool, tasks: KnownTasks
    ) -> None:
        self.ctx = ctx
        self.key = key
        self.default_worker = worker_name(worker, "")
        self.model_events_allowed = model_events_allowed
        self.tasks = tasks
        self.now = time.time_ns() // 1_000_000
        self.jobs: dict[str, TaskInfo] = {}
        self.plain_jobs: dict[str, TaskInfo] = {}
        self.out = Collected()
        self.errors: Counter = Counter()

    def run(self, events: list[Any]) -> Prepared:
        self._load_jobs(events)
        fast = self._scalar
        for event in events:
            if fast(event):
                continue
            try:
                self._one(event)
            except Bad as bad:
                self.errors[bad.reason] += 1
        return self._prepared()

    def _scalar(self, event: Any) -> bool:
        """The common case, a plain scalar of an unlocked task, checked and kept without detours; anything
        else (also every mistake) is left to :meth:`_one`, which says what is wrong."""
        if type(event) is not dict or event.get("type") != "training_stats_scalar" or event.get("model_event"):
            return False
        task = event.get("task")
        job = self.plain_jobs.get(task) if type(task) is str else None
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
        label = event.get("x_axis_label")
        if label is not None and (type(label) is not str or len(label) > MAX_NAME):
            return False
        self.out.scalar(job.job, job.project, (metric, variant, iteration), ts, value, worker, 0)
        if label is not None:
            self.out.label((job.job, metric, variant), iteration, ts, label)
        return True

    def _load_jobs(self, events: Iterable[Any]) -> None:
        ids = {e.get("task") for e in events if isinstance(e, dict) and isinstance(e.get("task"), str)}
        ids = [i for i in ids if JOB_ID.match(i)]
        found = self.tasks.get_many(self.ctx, ids) if ids else {}
        self.jobs = {i: job for i, job in found.items() if self.key.allows_project(job.project)}
        self.plain_jobs = {i: job for i, job in self.jobs.items() if not job.locked and not job.model}
        if self.jobs and not self.key.can("write"):
            raise Forbidden(f"this API key is '{self.key.role}'; adding events needs 'write'")

    def _one(self, event: Any) -> None:
        if isinstance(event, jsontext.Refused):
            raise Bad(f"Event {event.reason}")
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
        if job is None or job.model != model:
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
        metric, variant, iteration = self._names(event, named=kind != "image")
        if kind == "scalar":
            value = _number(event.get("value"))
            label = event.get("x_axis_label")
            if label is not None and (not isinstance(label, str) or len(label) > MAX_NAME):
                raise Bad(f"'x_axis_label' must be a string of at most {MAX_NAME} characters")
            self.out.scalar(job.job, job.project, (metric, variant, iteration), ts, value, worker, int(model))
            if label is not None:
                self.out.label((job.job, metric, variant), iteration, ts, label)
            return
        row: dict[str, Any] = {
            "kind": kind,
            "metric": metric,
            "variant": variant,
            "iter": iteration,
            "key": "",
            "ts": ts,
            "worker": worker,
            "url": "",
            "payload": "",
            "model_event": int(model),
        }
        if kind == "vector":
            values = event.get("values", event.get("value"))
            if not isinstance(values, list) or not all(
                isinstance(v, (int, float)) and not isinstance(v, bool) for v in values
            ):
                raise Bad("Vector event must have 'values': a list of numbers")
            row["payload"] = orjson.dumps([v if math.isfinite(v) else None for v in values]).decode()
        elif kind == "plot":
            row["payload"] = self._plot(event.get("plot_str"))
        else:
            row.update(self._image(event, metric, variant, iteration))
        if len(row["payload"]) > MAX_PAYLOAD:
            raise Bad(f"An event is at most {MAX_PAYLOAD} bytes")
        self.out.event(job.job, job.project, row)

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

    def _names(self, event: dict[str, Any], *, named: bool = True) -> tuple[str, str, int]:
        """Metric, variant and iteration; ``named``: the metric is required (a debug image needs only its task
        and type, as in ClearML's events document)."""
        metric = event.get("metric")
        variant = event.get("variant")
        variant = "" if variant is None else variant
        if metric is None and not named:
            metric = ""
        if not isinstance(metric, str) or (named and not metric):
            raise Bad("Event must have a non-empty 'metric'")
        if not isinstance(variant, str):
            raise Bad("'variant' must be a string")
        if len(metric) > MAX_NAME or len(variant) > MAX_NAME:
            raise Bad(f"Metric and variant names are at most {MAX_NAME} characters")
        return metric, variant, self._iteration(event)

    @staticmethod
    def _iteration(event: dict[str, Any]) -> int:
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
        return iteration

    def _plot(self, plot_str: Any) -> str:
        if plot_str is None or plot_str == "":
            return "null"
        if not isinstance(plot_str, str):
            raise Bad("'plot_str' must be a string")
        if len(plot_str) > MAX_PAYLOAD:
            raise Bad(f"Plot is larger than {MAX_PAYLOAD} bytes")
        if jsontext.depth(plot_str) > jsontext.MAX_DEPTH:
            raise Bad(f"Plot is nested deeper than {jsontext.MAX_DEPTH} levels")
        try:
            orjson.loads(plot_str)
            return plot_str
        except orjson.JSONDecodeError:
            return orjson.dumps(plot_str).decode()  # kept as a JSON string, given back unchanged

    def _image(self, event: dict[str, Any], metric: str, variant: str, iteration: int) -> dict[str, Any]:
        from .files import native_url

        url = event.get("url")
        if url is None:
            url = ""
        if not isinstance(url, str) or len(url) > MAX_URL:
            raise Bad(f"A debug image's 'url' must be a string of at most {MAX_URL} characters")
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
        native = native_url(url) if url else None
        if native:
            meta["file"] = native
        return {"url": url, "key": key, "payload": orjson.dumps(meta).decode() if meta else ""}

    def _log(self, job: TaskInfo, event: dict[str, Any], ts: int, worker: str) -> None:
        msg = event.get("msg")
        if msg is None:
            msg = ""
        if not isinstance(msg, str):
            raise Bad("Log event must have 'msg': a string")
        if len(msg) > MAX_MSG:
            raise Bad(f"A log message is at most {MAX_MSG} characters")
        level = event.get("level")
        level = LEVELS.get(level.lower()) if isinstance(level, str) else ("info" if level is None else None)
        if level is None:
            raise Bad(f"Invalid log level {event.get('level')!r}")
        fields = None
        if any(event.get(name) is not None for name in ("metric", "variant", "iter")):
            metric, variant = event.get("metric") or "", event.get("variant") or ""
            if not isinstance(metric, str) or not isinstance(variant, str):
                raise Bad("'metric' and 'variant' must be strings")
            if len(metric) > MAX_NAME or len(variant) > MAX_NAME:
                raise Bad(f"Metric and variant names are at most {MAX_NAME} characters")
            fields = (metric, variant, None if event.get("iter") is None else self._iteration(event))
        self.out.log(job.job, job.project, worker or "worker-0", LogLine(ts, level, msg, fields))

    # -- output ------------------------------------------------------------------------------------------

    def _prepared(self) -> Prepared:
        """The gathered events as tables, once their jobs and workers are registered as the native ingest
        registers them."""
        prepared = Prepared(errors=self.errors)
        if not self.out.count:
            return prepared
        batch = self.out.registration()
        resolve_jobs(self.ctx, self.key, batch)
        for job in set(self.out.jobs) - set(batch.jobs):  # moved to another project meanwhile
            prepared.errors["Invalid task id"] += self.out.drop(job)
        prepared.added = self.out.count
        prepared.tables = self.out.tables()
        prepared.labels = {series: label for series, (_, _, label) in self.out.labels.items()}
        return prepared
