"""JSON lines: one event object per line (see docs/ingest.md)."""

from __future__ import annotations

import orjson

from ..errors import BadRequest, PayloadTooLarge
from .batch import Batch
from .lines_arrow import read_lines
from .lines_fast import add_events_fast
from .rules import (
    KINDS,
    MAX_MSG,
    MAX_NAME,
    MAX_PAYLOAD,
    _floats,
    _identity,
    _iter,
    _level,
    _name,
    _Reject,
    _ts,
    _value,
    _worker,
)


def parse_lines(data: bytes, defaults: dict, max_events: int, now_ms: int) -> Batch:
    """The events of a JSON-lines body, the bad ones counted per reason.

    Three paths answer alike (tests/test_ingest_lines_fast.py and test_ingest_lines_arrow.py hold them to it): Arrow's
    JSON reader for a body of good events of one kind (``lines_arrow``), the fast path for good events of any mix
    (``lines_fast``), and the per-line path for the rest.
    """
    batch = read_lines(data, defaults, max_events, now_ms)
    if batch is not None:
        return batch
    batch = Batch()
    events = load_lines(data, max_events)
    if events is None or not add_events_fast(events, defaults, batch, now_ms):
        parse_each_line(data, defaults, batch, max_events, now_ms, parsed=events)
    return batch


def load_lines(data: bytes, max_events: int) -> list | None:
    """Each line that is not blank, parsed as the per-line path parses it; None if one is not JSON or too many."""
    lines = [raw for raw in data.split(b"\n") if raw.strip()]
    if len(lines) > max_events:
        return None
    try:
        return list(map(orjson.loads, lines))
    except orjson.JSONDecodeError:
        return None


def parse_each_line(
    data: bytes, defaults: dict, batch: Batch, max_events: int, now_ms: int, parsed: list | None = None
) -> None:
    """The per-line path: check and add one line at a time; what decides every body the fast path leaves.

    ``parsed``, when given, is ``load_lines(data, ...)``: the lines are then not parsed a second time.
    """
    index = -1
    for raw in data.split(b"\n"):
        if not raw.strip():
            continue
        index += 1
        if index >= max_events:
            raise PayloadTooLarge(f"a batch holds at most {max_events} events", field="body")
        if parsed is not None:
            event = parsed[index]
        else:
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


def _one_event(event: dict, defaults: dict, batch: Batch, now_ms: int) -> None:
    kind = event.get("kind", event.get("type", defaults.get("kind")))
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
