"""Turn an ingest body (JSON lines, the columnar form or Arrow, see docs/ingest.md) into table columns.

Bad events are counted per reason and dropped; good ones are kept. Nothing here touches the store.
"""

from __future__ import annotations

import gzip
import time
from typing import Any

import numpy as np
import orjson
import zstandard

from ..errors import BadRequest, PayloadTooLarge
from .arrow import CONTENT_TYPE as ARROW
from .arrow import parse_arrow
from .batch import Batch
from .lines import parse_lines
from .rules import (
    ITER_MAX,
    ITER_MIN,
    KINDS,
    MAX_MSG,
    MAX_NAME,
    MAX_PAYLOAD,
    TS_AHEAD,
    TS_MIN,
    _identity,
    _level,
    _name,
    _Reject,
    _value,
    _worker,
)

# What other modules import from here (the names lived here before the split).
__all__ = [
    "ITER_MAX",
    "ITER_MIN",
    "KINDS",
    "MAX_MSG",
    "MAX_NAME",
    "MAX_PAYLOAD",
    "TS_AHEAD",
    "TS_MIN",
    "Batch",
    "decode",
    "parse_body",
]


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
    if kind in ("application/x-ndjson", "application/jsonl", "application/json-lines", "text/plain", ""):
        return parse_lines(data, defaults, max_events, now_ms)
    batch = Batch()
    if kind == "application/json":
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
    elif kind == ARROW:
        parse_arrow(data, defaults, batch, max_events, now_ms)
    else:
        raise BadRequest(
            f"Content-Type {content_type!r} is not supported; use application/x-ndjson, application/json or {ARROW}",
            field="Content-Type",
        )
    return batch


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
    kind = series.get("kind", defaults.get("kind"))
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
