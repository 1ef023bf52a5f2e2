"""The good events of an ``add_batch`` request, gathered column by column into the store's tables.

Events checked by :mod:`.ingest` are added here one at a time and become, at the end, the tables the writer
inserts (``scalars``, ``events``, ``logs`` and ``log_fields``) and the registration of their jobs and workers
that the native ingest makes (``resolve_jobs``): the same rows the native ingest would build, without writing
the events out as native JSON and parsing them again.

- Points: one row per (task, metric, variant, iteration); of two in one request, the one of the later
  timestamp is kept (the later one in the request on a tie), as ClearML keeps the last reported.
- Log lines: a sequence number is made up per (task, worker) (see :func:`log_seqs`); a line that names a metric,
  variant or iteration keeps them in ``log_fields``.
- ``x_axis_label`` of a scalar event: the label of its series, the one of its highest (iteration, timestamp).
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from ...ingest.batch import Batch
from ...store.columns import columns_to_arrow

Series = tuple[str, str, str]
_SCALARS = ("job", "metric", "variant", "iter", "ts", "value", "worker", "model_event")
_EVENTS = ("job", "kind", "metric", "variant", "iter", "key", "ts", "worker", "url", "payload", "model_event")


@dataclass
class LogLine:
    ts: int
    level: str
    msg: str
    fields: tuple[str, str, int | None] | None = None  # metric, variant, iteration


@dataclass
class Collected:
    """The good events of one request."""

    scalars: dict[str, list] = field(default_factory=lambda: {name: [] for name in _SCALARS})
    events: dict[str, list] = field(default_factory=lambda: {name: [] for name in _EVENTS})
    logs: dict[tuple[str, str], list[LogLine]] = field(default_factory=dict)
    jobs: dict[str, str] = field(default_factory=dict)  # job -> project
    first_ts: dict[str, int] = field(default_factory=dict)
    labels: dict[Series, tuple[int, int, str]] = field(default_factory=dict)  # series -> (iter, ts, label)
    _points: dict[tuple[str, str, str, int], int] = field(default_factory=dict)

    @property
    def count(self) -> int:
        return len(self.scalars["ts"]) + len(self.events["ts"]) + sum(len(lines) for lines in self.logs.values())

    def _seen(self, job: str, project: str, ts: int) -> None:
        self.jobs[job] = project
        if ts < self.first_ts.get(job, 1 << 62):
            self.first_ts[job] = ts

    def scalar(
        self, job: str, project: str, names: tuple[str, str, int], ts: int, value: float, worker: str, model: int
    ) -> None:
        """A point; ``names`` is (metric, variant, iteration)."""
        self._seen(job, project, ts)
        metric, variant, iteration = names
        columns = self.scalars
        key = (job, metric, variant, iteration)
        at = self._points.get(key)
        if at is not None:
            if ts >= columns["ts"][at]:
                columns["ts"][at], columns["value"][at], columns["worker"][at] = ts, value, worker
            return
        self._points[key] = len(columns["ts"])
        for name, item in zip(_SCALARS, (job, metric, variant, iteration, ts, value, worker, model), strict=True):
            columns[name].append(item)

    def label(self, series: Series, iteration: int, ts: int, text: str) -> None:
        known = self.labels.get(series)
        if known is None or (iteration, ts) >= known[:2]:
            self.labels[series] = (iteration, ts, text)

    def event(self, job: str, project: str, row: dict[str, Any]) -> None:
        """A vector, plot or debug image: ``row`` holds the columns of ``events`` but the job."""
        self._seen(job, project, row["ts"])
        columns = self.events
        columns["job"].append(job)
        for name in _EVENTS[1:]:
            columns[name].append(row[name])

    def log(self, job: str, project: str, worker: str, line: LogLine) -> None:
        self._seen(job, project, line.ts)
        self.logs.setdefault((job, worker), []).append(line)

    def drop(self, job: str) -> int:
        """Leave out every event of ``job``; answers how many there were."""
        dropped = 0
        for columns in (self.scalars, self.events):
            keep = [i for i, owner in enumerate(columns["job"]) if owner != job]
            dropped += len(columns["job"]) - len(keep)
            for name, values in columns.items():
                columns[name] = [values[i] for i in keep]
        for key in [key for key in self.logs if key[0] == job]:
            dropped += len(self.logs.pop(key))
        keys = zip(*(self.scalars[name] for name in ("job", "metric", "variant", "iter")), strict=True)
        self._points = {key: at for at, key in enumerate(keys)}
        self.labels = {series: label for series, label in self.labels.items() if series[0] != job}
        self.jobs.pop(job, None)
        self.first_ts.pop(job, None)
        return dropped

    def tables(self) -> dict[str, pa.Table]:
        """The store's tables of the gathered events (``logs`` before ``log_fields``: a line's fields are never
        stored without the line)."""
        out: dict[str, pa.Table] = {}
        if self.scalars["ts"]:
            out["scalars"] = columns_to_arrow("scalars", self.scalars)
        if self.events["ts"]:
            out["events"] = columns_to_arrow("events", self.events)
        if self.logs:
            logs: dict[str, list] = {name: [] for name in ("job", "ts", "worker", "seq", "level", "msg")}
            named: dict[str, list] = {name: [] for name in ("job", "ts", "worker", "seq", "metric", "variant", "iter")}
            for (job, worker), lines in self.logs.items():
                seqs = log_seqs([(line.ts, line.msg) for line in lines])
                for line, seq in zip(lines, seqs, strict=True):
                    for name, item in zip(logs, (job, line.ts, worker, seq, line.level, line.msg), strict=True):
                        logs[name].append(item)
                    if line.fields is not None:
                        for name, item in zip(named, (job, line.ts, worker, seq, *line.fields), strict=True):
                            named[name].append(item)
            out["logs"] = columns_to_arrow("logs", logs)
            if named["ts"]:
                out["log_fields"] = columns_to_arrow("log_fields", named)
        return out

    def registration(self) -> Batch:
        """What ``resolve_jobs`` registers for these events: their jobs with their projects, the workers of their
        log lines, and each job's earliest timestamp."""
        batch = Batch()
        batch.jobs = dict(self.jobs)
        batch.workers = set(self.logs)
        batch.first_ts = dict(self.first_ts)
        batch.accepted = self.count
        return batch


def log_seqs(lines: list[tuple[int, str]]) -> list[int]:
    """Sequence numbers for one request's lines (timestamp, text) of one task and worker.

    Log events carry none, so one is made up that orders the lines of a worker that share a millisecond and
    makes a re-sent request store nothing twice: ``seq = d << 41 | i << 20 | h`` where ``i`` is the line's
    position among the request's lines of that task and worker (arrival order within a request), ``d`` the
    distance in ms from the line's timestamp to the request's latest line of that task and worker (a later
    request reaches further, so at an equal timestamp its lines sort after an earlier request's), and ``h`` 20
    bits of the text's CRC-32 (so two different lines at the same timestamp and position of two requests never
    collide). A request sent again byte for byte gets the same numbers and is not stored twice; only a line
    identical in timestamp, position, distance and text to one already stored is taken for a re-send.
    """
    anchor = max(ts for ts, _ in lines)
    out = []
    for index, (ts, msg) in enumerate(lines):
        distance = min(anchor - ts, (1 << 22) - 1)
        out.append(distance << 41 | min(index, (1 << 21) - 1) << 20 | (zlib.crc32(msg.encode()) & 0xFFFFF))
    return out
