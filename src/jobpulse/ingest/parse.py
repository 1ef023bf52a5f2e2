"""Turn an ingest body (JSON lines or the columnar form, see docs/ingest.md) into table columns.

Bad events are counted per reason and dropped; good ones are kept. Nothing here touches the store.
"""

from __future__ import annotations

import gzip
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import orjson
import pyarrow as pa
import zstandard

from ..errors import BadRequest, PayloadTooLarge
from ..store.columns import SCHEMAS, columns_to_arrow
from ..store.jobs import JOB_ID, PROJECT_ID, WORKER_ID
from ..store.logs import LEVELS

KINDS = ("scalar", "vector", "plot", "image", "log", "system")
MAX_NAME = 255
MAX_MSG = 1 << 20
MAX_PAYLOAD = 4 << 20
ITER_MIN, ITER_MAX = -(2**31), 2**53
TS_MIN = 946_684_800_000  # 2000-01-01
TS_AHEAD = 7 * 86_400_000
MAX_EXAMPLES = 10
_LEVEL_ALIASES = {"warn": "warning", "fatal": "critical", "notset": "info", "trace": "debug", "err": "error"}


@dataclass
class Batch:
    """The good events of one request, as columns per table, and what was wrong with the rest."""

    columns: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    rows: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # single events (JSON lines)
    jobs: dict[str, str | None] = field(default_factory=dict)  # job -> project named by the events
    workers: set[tuple[str, str]] = field(default_factory=set)
    first_ts: dict[str, int] = field(default_factory=dict)
    accepted: int = 0
    errors: Counter = field(default_factory=Counter)
    examples: list[dict[str, Any]] = field(default_factory=list)

    @property
    def rejected(self) -> int:
        return sum(self.errors.values())

    def reject(self, index: int, reason: str, detail: str) -> None:
        self.errors[reason] += 1
        if len(self.examples) < MAX_EXAMPLES:
            self.examples.append({"index": index, "reason": reason, "detail": detail})

    def add(self, table: str, chunk: dict[str, Any], job: str, project: str | None, worker: str, ts0: int) -> None:
        ts = chunk["ts"]
        if isinstance(ts, list) and len(ts) == 1:  # one event of JSON lines: gathered as a row
            self.rows.setdefault(table, []).append({k: v[0] if isinstance(v, list) else v for k, v in chunk.items()})
        else:
            self.columns.setdefault(table, []).append(chunk)
        known = self.jobs.get(job)
        if known is None:
            self.jobs[job] = project
        if worker and table in ("logs", "system"):
            self.workers.add((job, worker))
        if ts0 < self.first_ts.get(job, 1 << 62):
            self.first_ts[job] = ts0

    def drop_job(self, job: str) -> int:
        """Remove every event of ``job`` (its project was refused); answers how many."""
        dropped = 0
        for table, chunks in self.columns.items():
            kept = []
            for chunk in chunks:
                if chunk["job"] == job:
                    dropped += _chunk_len(table, chunk)
                else:
                    kept.append(chunk)
            self.columns[table] = kept
        for table, rows in self.rows.items():
            kept_rows = [row for row in rows if row["job"] != job]
            dropped += len(rows) - len(kept_rows)
            self.rows[table] = kept_rows
        self.jobs.pop(job, None)
        self.workers = {(j, w) for j, w in self.workers if j != job}
        self.accepted -= dropped
        return dropped

    def tables(self) -> dict[str, pa.Table]:
        parts: dict[str, list[pa.Table]] = {}
        for table, chunks in self.columns.items():
            parts.setdefault(table, []).extend(_to_arrow(table, c) for c in chunks)
        for table, rows in self.rows.items():
            if rows:
                parts.setdefault(table, []).append(pa.Table.from_pylist(rows, schema=SCHEMAS[table]))
        return {table: pa.concat_tables(tables) for table, tables in parts.items() if tables}


def decode(body: bytes, encoding: str | None, limit: int) -> bytes:
    """Undo a gzip or zstd Content-Encoding, refusing to inflate past ``limit`` bytes."""
    encoding = (encoding or "identity").strip().lower()
    if encoding in ("identity", ""):
        data = body
    elif encoding in ("gzip", "x-gzip"):
        try:
            with gzip.GzipFile(fileobj=_Bytes(body)) as f:
                data = f.read(limit + 1)
        except (OSError, EOFError) as exc:
            raise BadRequest(f"body is not valid gzip: {exc}", field="Content-Encoding") from exc
    elif encoding == "zstd":
        try:
            data = zstandard.ZstdDecompressor().stream_reader(body).read(limit + 1)
        except zstandard.ZstdError as exc:
            raise BadRequest(f"body is not valid zstd: {exc}", field="Content-Encoding") from exc
    else:
        raise BadRequest(f"Content-Encoding {encoding!r} is not supported; use gzip or zstd", field="Content-Encoding")
    if len(data) > limit:
        raise PayloadTooLarge(f"body is larger than {limit} bytes once decoded", field="body")
    return data


class _Bytes:
    def __init__(self, data: bytes) -> None:
        self._data, self._pos = data, 0

    def read(self, n: int = -1) -> bytes:
        end = len(self._data) if n < 0 else self._pos + n
        chunk, self._pos = self._data[self._pos : end], min(end, len(self._data))
        return chunk


def parse_body(
    data: bytes,
    content_type: str | None,
    defaults: dict[str, str | None],
    *,
    max_events: int,
    now_ms: int | None = None,
) -> Batch:
    now_ms = now_ms if now_ms is not None else time.time_ns() // 1_000_000
    kind = (content_type or "").split(";")[0].strip().lower()
    batch = Batch()
    if kind in ("application/x-ndjson", "application/jsonl", "application/json-lines", "text/plain", ""):
        _parse_lines(data, defaults, batch, max_events, now_ms)
    elif kind == "application/json":
        try:
            doc = orjson.loads(data)
        except orjson.JSONDecodeError as exc:
            raise BadRequest(f"body is not valid JSON: {exc}", field="body") from exc
        if not isinstance(doc, dict) or not isinstance(doc.get("series"), list):
            raise BadRequest("a columnar body is an object with a 'series' array", field="series")
        merged = dict(defaults)
        for name in ("project", "job", "worker"):
            if doc.get(name) is not None:
                merged[name] = doc[name]
        _parse_columnar(doc["series"], merged, batch, max_events, now_ms)
    else:
        raise BadRequest(
            f"Content-Type {content_type!r} is not supported; use application/x-ndjson or application/json",
            field="Content-Type",
        )
    return batch


# -- JSON lines --------------------------------------------------------------------------------------


def _parse_lines(data: bytes, defaults: dict, batch: Batch, max_events: int, now_ms: int) -> None:
    index = -1
    for raw in data.split(b"\n"):
        if not raw.strip():
            continue
        index += 1
        if index >= max_events:
            raise PayloadTooLarge(f"a batch holds at most {max_events} events", field="body")
        try:
            event = orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            batch.reject(index, "invalid_json", f"line is not valid JSON: {exc}")
            continue
        if not isinstance(event, dict):
            batch.reject(index, "invalid_event", "an event is a JSON object")
            continue
        try:
            _one_event(event, defaults, batch, now_ms)
        except _Reject as bad:
            batch.reject(index, bad.reason, bad.detail)
    if index < 0:
        raise BadRequest("body holds no events", field="body")


class _Reject(Exception):
    def __init__(self, reason: str, detail: str) -> None:
        self.reason, self.detail = reason, detail


def _one_event(event: dict, defaults: dict, batch: Batch, now_ms: int) -> None:
    kind = event.get("kind", event.get("type"))
    if kind not in KINDS:
        raise _Reject("invalid_kind", f"'kind' must be one of {', '.join(KINDS)}, got {kind!r}")
    job, project = _identity(event, defaults)
    worker = _worker(event, defaults, kind)
    ts = _ts(event.get("ts"), now_ms)
    if kind in ("scalar", "vector", "plot", "image"):
        metric, variant = _name(event, "metric", required=True), _name(event, "variant", required=False)
        it = _iter(event.get("iter"))
        if kind == "scalar":
            value = _value(event.get("value"))
            chunk = {
                "job": job,
                "metric": [metric],
                "variant": [variant],
                "iter": [it],
                "ts": [ts],
                "value": [value],
                "worker": worker,
                "model_event": int(bool(event.get("model_event"))),
            }
            batch.add("scalars", chunk, job, project, worker, ts)
        else:
            key, url, payload = "", "", ""
            if kind == "vector":
                values = event.get("values")
                if not isinstance(values, list):
                    raise _Reject("invalid_values", "vector event needs a 'values' array of numbers")
                payload = orjson.dumps([_value(v) if isinstance(v, str) else v for v in values]).decode()
                _floats(values)
            elif kind == "plot":
                plot = event.get("plot")
                if isinstance(plot, dict):
                    payload = orjson.dumps(plot).decode()
                elif isinstance(plot, str):
                    try:
                        orjson.loads(plot)
                    except orjson.JSONDecodeError as exc:
                        raise _Reject("invalid_plot", f"'plot' is not valid JSON: {exc}") from exc
                    payload = plot
                else:
                    raise _Reject("invalid_plot", "plot event needs 'plot': a Plotly figure object or its JSON")
            else:
                url = event.get("url")
                if not isinstance(url, str) or not url or len(url) > 2048:
                    raise _Reject("invalid_url", "image event needs 'url': the address of the uploaded file")
                key = event.get("key") or f"{metric}/{variant}/{it}"
                if not isinstance(key, str) or len(key) > MAX_NAME:
                    raise _Reject("invalid_key", f"'key' must be a string of at most {MAX_NAME} characters")
                extra = event.get("meta")
                payload = orjson.dumps(extra).decode() if isinstance(extra, dict) else ""
            if len(payload) > MAX_PAYLOAD:
                raise _Reject("payload_too_large", f"an event's payload is at most {MAX_PAYLOAD} bytes")
            chunk = {
                "job": job,
                "kind": kind,
                "metric": [metric],
                "variant": [variant],
                "iter": [it],
                "key": [key],
                "ts": [ts],
                "worker": worker,
                "url": [url],
                "payload": [payload],
                "model_event": int(bool(event.get("model_event"))),
            }
            batch.add("events", chunk, job, project, worker, ts)
    elif kind == "log":
        seq = event.get("seq")
        if not isinstance(seq, int) or isinstance(seq, bool) or seq < 0 or seq >= 2**64:
            raise _Reject("invalid_seq", "log event needs 'seq': an integer >= 0 assigned once by the sender")
        msg = event.get("msg")
        if not isinstance(msg, str):
            raise _Reject("invalid_msg", "log event needs 'msg': a string")
        if len(msg) > MAX_MSG:
            raise _Reject("msg_too_long", f"a log line is at most {MAX_MSG} characters; split longer output")
        level = _level(event.get("level"))
        batch.add(
            "logs",
            {"job": job, "ts": [ts], "worker": worker, "seq": [seq], "level": [level], "msg": [msg]},
            job,
            project,
            worker,
            ts,
        )
    else:
        metric = _name(event, "metric", required=True)
        device = event.get("device", "")
        if isinstance(device, int) and not isinstance(device, bool):
            device = str(device)
        if not isinstance(device, str) or len(device) > 64:
            raise _Reject("invalid_device", "'device' is the accelerator index as a string, '' for the host")
        value = _value(event.get("value"))
        batch.add(
            "system",
            {
                "job": job,
                "worker": worker,
                "metric": [metric],
                "device": [device],
                "ts": [ts],
                "value": [value],
            },
            job,
            project,
            worker,
            ts,
        )
    batch.accepted += 1


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


# -- columnar ----------------------------------------------------------------------------------------


def _parse_columnar(series_list: list, defaults: dict, batch: Batch, max_events: int, now_ms: int) -> None:
    index = 0
    for series in series_list:
        if not isinstance(series, dict):
            batch.reject(index, "invalid_series", "each entry of 'series' is an object")
            index += 1
            continue
        length = _series_length(series)
        if index + length > max_events:
            raise PayloadTooLarge(f"a batch holds at most {max_events} events", field="body")
        try:
            _one_series(series, defaults, batch, index, length, now_ms)
        except _Reject as bad:
            for i in range(max(length, 1)):
                batch.reject(index + i, bad.reason, bad.detail)
        index += max(length, 1)
    if index == 0:
        raise BadRequest("body holds no events", field="series")


def _series_length(series: dict) -> int:
    for name in ("value", "iter", "ts", "seq", "msg"):
        if isinstance(series.get(name), list):
            return len(series[name])
    return 0


def _column(series: dict, name: str, length: int, default: Any = None) -> Any:
    value = series.get(name, default)
    if isinstance(value, list):
        if len(value) != length:
            raise _Reject("length_mismatch", f"'{name}' has {len(value)} entries, the series has {length}")
        return value
    return value


def _one_series(series: dict, defaults: dict, batch: Batch, base: int, n: int, now_ms: int) -> None:
    kind = series.get("kind")
    if kind not in ("scalar", "system", "log"):
        raise _Reject("invalid_kind", "columnar series are of kind scalar, system or log")
    if n == 0:
        raise _Reject("empty_series", "a series needs arrays of at least one point")
    job, project = _identity(series, defaults)
    worker = _worker(series, defaults, kind)
    ts = _column(series, "ts", n)
    if ts is None:
        ts_arr = np.full(n, now_ms, dtype=np.int64)
    else:
        ts_arr = _int_array(ts, "ts", "invalid_ts")
        if ts_arr.min() < TS_MIN or ts_arr.max() > now_ms + TS_AHEAD:
            raise _Reject("ts_out_of_range", "'ts' must be epoch milliseconds between 2000-01-01 and a week from now")
    keep = np.ones(n, dtype=bool)
    if kind == "log":
        seq = _int_array(_column(series, "seq", n) or [], "seq", "invalid_seq")
        if len(seq) != n or (seq < 0).any():
            raise _Reject("invalid_seq", "log series need 'seq': integers >= 0 assigned once by the sender")
        msgs = _column(series, "msg", n)
        if not isinstance(msgs, list):
            raise _Reject("invalid_msg", "log series need 'msg': an array of strings")
        levels = _column(series, "level", n, "info")
        level_list = [_level(levels)] * n if not isinstance(levels, list) else None
        for i, msg in enumerate(msgs):
            reason = None
            if not isinstance(msg, str):
                reason = ("invalid_msg", "'msg' entries are strings")
            elif len(msg) > MAX_MSG:
                reason = ("msg_too_long", f"a log line is at most {MAX_MSG} characters; split longer output")
            if level_list is None:
                try:
                    levels[i] = _level(levels[i])
                except _Reject as bad:
                    reason = (bad.reason, bad.detail)
            if reason:
                keep[i] = False
                batch.reject(base + i, *reason)
        chunk = {
            "job": job,
            "ts": ts_arr,
            "worker": worker,
            "seq": seq.astype(np.uint64),
            "level": level_list or levels,
            "msg": msgs,
        }
        table = "logs"
    else:
        values = _column(series, "value", n)
        if not isinstance(values, list):
            raise _Reject("invalid_value", f"{kind} series need 'value': an array of numbers")
        value_arr = _value_array(values, keep, batch, base)
        metric = _name(series, "metric", required=True)
        if kind == "scalar":
            iters = _column(series, "iter", n)
            if not isinstance(iters, list):
                raise _Reject("invalid_iter", "scalar series need 'iter': an array of integers")
            iter_arr = _int_array(iters, "iter", "invalid_iter")
            if iter_arr.min() < ITER_MIN or iter_arr.max() > ITER_MAX:
                raise _Reject("iter_out_of_range", f"'iter' must be in [{ITER_MIN}, {ITER_MAX}]")
            chunk = {
                "job": job,
                "metric": metric,
                "variant": _name(series, "variant", required=False),
                "iter": iter_arr,
                "ts": ts_arr,
                "value": value_arr,
                "worker": worker,
                "model_event": int(bool(series.get("model_event"))),
            }
            table = "scalars"
        else:
            device = series.get("device", "")
            if isinstance(device, int) and not isinstance(device, bool):
                device = str(device)
            if not isinstance(device, str) or len(device) > 64:
                raise _Reject("invalid_device", "'device' is the accelerator index as a string, '' for the host")
            chunk = {
                "job": job,
                "worker": worker,
                "metric": metric,
                "device": device,
                "ts": ts_arr,
                "value": value_arr,
            }
            table = "system"
    if not keep.all():
        chunk = {k: _take(v, keep) for k, v in chunk.items()}
    count = int(keep.sum())
    if count:
        batch.add(table, chunk, job, project, worker, int(ts_arr.min()))
        batch.accepted += count


def _int_array(values: list, name: str, reason: str) -> np.ndarray:
    try:
        arr = np.asarray(values)
    except (TypeError, ValueError) as exc:
        raise _Reject(reason, f"'{name}' must be an array of integers") from exc
    if arr.dtype.kind == "f" and np.all(np.isfinite(arr)) and np.all(arr == np.floor(arr)):
        arr = arr.astype(np.int64)
    if arr.dtype.kind not in "iu" or arr.ndim != 1:
        raise _Reject(reason, f"'{name}' must be an array of integers")
    return arr.astype(np.int64, copy=False)


def _value_array(values: list, keep: np.ndarray, batch: Batch, base: int) -> np.ndarray:
    try:
        arr = np.asarray(values, dtype=np.float64)
        # numpy reads None as NaN; a NaN is only allowed where the sender wrote "NaN".
        if arr.ndim == 1 and all(values[i] is not None for i in np.flatnonzero(np.isnan(arr))):
            return arr
    except (TypeError, ValueError):
        pass
    out = np.empty(len(values), dtype=np.float64)
    for i, v in enumerate(values):
        try:
            out[i] = _value(v)
        except _Reject as bad:
            keep[i] = False
            out[i] = 0.0
            batch.reject(base + i, bad.reason, bad.detail)
    return out


def _take(value: Any, keep: np.ndarray) -> Any:
    if isinstance(value, np.ndarray):
        return value[keep]
    if isinstance(value, list):
        return [v for v, k in zip(value, keep, strict=True) if k]
    return value


def _chunk_len(table: str, chunk: dict) -> int:
    return len(chunk["ts"])


def _to_arrow(table: str, chunk: dict[str, Any]) -> pa.Table:
    return columns_to_arrow(table, chunk, rows=len(chunk["ts"]))
