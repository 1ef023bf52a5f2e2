"""JSON lines: one event object per line (see docs/ingest.md).

One path for every body. ``limits.scan_lines`` finds the lines and refuses what is past a limit before any parser
sees a byte; the lines are read into ``Events`` columns; ``rules.check_events`` decides which events are good.

Reading is the only step with two ways, and they give the same columns. A large body whose lines are all objects is
read whole by Arrow's JSON reader (C++, on every core), where the reader cannot read a value otherwise than orjson
does: every field it makes is one of the event fields, typed as the rules read it, with no JSON ``null`` where a null
means something else than a missing field, and no number JSON has no literal for. Any other body, and a small one,
is read line by line by orjson, each line on its own, so that a line that is no JSON refuses that line alone.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pa_json

from .batch import Batch
from .fields import FIELDS, column
from .limits import MAX_DEPTH, Lines, depth, scan_lines
from .rules import DETAILS, SPECIAL, Events, check_events

# from this many lines on, Arrow's reader is quicker than orjson line by line
WHOLE_BODY_LINES = 1000
_EVENT_KINDS = ("vector", "plot", "image")
_TEXT = ("kind", "type", "project", "job", "worker", "metric", "variant", "device", "level", "msg")
_READER_TYPES: dict[str, tuple[pa.DataType, ...]] = {
    **{name: (pa.string(), pa.null()) for name in _TEXT},
    **{name: (pa.int64(), pa.null()) for name in ("iter", "ts", "seq")},
    "value": (pa.float64(), pa.int64(), pa.null()),
    "model_event": (pa.bool_(), pa.null()),
}
# the fields whose JSON null means something else than their absence (a null job is refused, a missing one is the
# query's); \u escapes of ASCII letters could spell them otherwise than the bytes the reader is checked against
_NULL_IS_NOT_MISSING = ("kind", "type", "project", "job", "worker", "device")
_ASCII_OR_SURROGATE_ESCAPE = re.compile(rb"\\u(?:00[2-7]|[dD][89a-fA-F])")
_EMPTY: dict[str, Any] = {}


def parse_lines(data: bytes, defaults: dict[str, Any], max_events: int, now_ms: int) -> Batch:
    """The events of a JSON-lines body, the bad ones counted per reason."""
    # the lines' ranges are freed once read, so that the rules reuse their memory
    events = read_lines(data, scan_lines(data, max_events), defaults)
    batch = Batch()
    check_events(events, batch, now_ms)
    return batch


def read_lines(data: bytes, lines: Lines, defaults: dict[str, Any]) -> Events:
    """The columns of every line: read whole where the body allows it (see the module's text), else line by line."""
    events = None
    if len(lines) >= WHOLE_BODY_LINES and lines.objects(data):
        events = read_whole(data, lines, defaults)
    return read_each(data, lines, defaults) if events is None else events


# -- line by line -----------------------------------------------------------------------------------------


def read_each(data: bytes, lines: Lines, defaults: dict[str, Any]) -> Events:
    """The columns of every line, each parsed by orjson on its own."""
    view = memoryview(data)
    texts = [view[start:end] for start, end in zip(lines.starts.tolist(), lines.ends.tolist(), strict=True)]
    refused = list(lines.refused)
    objects: list[Any] | None = None
    if not refused:
        try:
            objects = list(map(orjson.loads, texts))
        except orjson.JSONDecodeError:
            objects = None  # a line that is not JSON: each is parsed on its own, to name it
    if objects is None:
        objects = _each(texts, refused)
    not_object = [i for i, event in enumerate(objects) if type(event) is not dict]
    if not_object:
        skip = set(np.concatenate([rows for rows, _, _ in refused]).tolist()) if refused else set()
        named = [i for i in not_object if i not in skip]
        if named:
            refused.append((np.array(named), "invalid_event", "an event is a JSON object"))
        for i in not_object:
            objects[i] = _EMPTY
    events = Events(rows=len(objects), refused=refused)
    _add_columns(events, objects, defaults)
    return events


def _each(texts: list[memoryview], refused: list) -> list[Any]:
    """Each line parsed on its own; a line refused by the limits is not read, one that is not JSON is refused."""
    skip = set(np.concatenate([rows for rows, _, _ in refused]).tolist()) if refused else ()
    objects: list[Any] = []
    not_json: dict[int, str] = {}
    for i, text in enumerate(texts):
        if i in skip:
            objects.append(None)
            continue
        try:
            objects.append(orjson.loads(text))
        except orjson.JSONDecodeError as exc:
            not_json[i] = f"line is not valid JSON: {exc}"
            objects.append(None)
    if not_json:
        refused.append((np.array(list(not_json)), "invalid_json", not_json.__getitem__))
    return objects


def _add_columns(events: Events, objects: list[dict[str, Any]], defaults: dict[str, Any]) -> None:
    present = set().union(*objects)
    values: dict[str, list[Any]] = {}
    for name in ("kind", "project", "job", "worker"):
        default = defaults.get(name)
        if name in present or name == "kind" and "type" in present:
            if name == "kind":
                values[name] = [o.get("kind", o.get("type", default)) for o in objects]
            else:
                values[name] = [o.get(name, default) for o in objects]
        elif default is not None:
            events.constants[name] = default  # the query's, for every event
    if "device" in present:
        values["device"] = [o.get("device", "") for o in objects]
    for name in FIELDS:
        if name not in values and name in present and name not in ("url", "key"):
            values[name] = [o.get(name) for o in objects]
    kinds = values.get("kind") or [events.constants.get("kind")] * len(objects)
    rows = [i for i, k in enumerate(kinds) if k in _EVENT_KINDS]
    if rows:
        _add_event_fields(events, objects, values, kinds, rows)
    for name, field_values in values.items():
        events.columns[name], wrong = column(name, field_values)
        if wrong:
            events.wrong[name] = wrong


def _add_event_fields(
    events: Events, objects: list[dict[str, Any]], values: dict[str, list], kinds: list[Any], rows: list[int]
) -> None:
    """The payload of vector, plot and image events, and the url and key of images."""
    n = len(objects)
    payloads: list[str | None] = [None] * n
    urls: list[Any] = [None] * n
    keys: list[Any] = [None] * n
    wrong: dict[tuple[str, str], list[int]] = {}
    for row in rows:
        event, kind = objects[row], kinds[row]
        try:
            if kind == "image":
                urls[row], keys[row] = event.get("url"), event.get("key")
                meta = event.get("meta")
                payloads[row] = orjson.dumps(meta).decode() if isinstance(meta, dict) else ""
            else:
                payloads[row] = _vector(event.get("values")) if kind == "vector" else _plot(event.get("plot"))
        except _Wrong as bad:
            wrong.setdefault((bad.reason, bad.detail), []).append(row)
    events.columns["payload"] = pa.array(payloads, pa.string())
    events.wrong["payload"] = [(np.array(at), reason, detail) for (reason, detail), at in wrong.items()]
    values["url"], values["key"] = urls, keys


class _Wrong(Exception):
    def __init__(self, reason: str, detail: str) -> None:
        self.reason, self.detail = reason, detail


def _vector(values: Any) -> str | None:
    if not isinstance(values, list):
        return None
    numbers = []
    for value in values:
        if type(value) in (int, float):
            numbers.append(value)
        elif type(value) is str and value in SPECIAL:
            numbers.append(SPECIAL[value])
        else:
            raise _Wrong("invalid_values", DETAILS["invalid_values"])
    return orjson.dumps(numbers).decode()


def _plot(plot: Any) -> str | None:
    if isinstance(plot, dict):
        return orjson.dumps(plot).decode()
    if not isinstance(plot, str):
        return None
    encoded = plot.encode()
    if depth(encoded) > MAX_DEPTH:
        raise _Wrong("too_deep", f"'plot' is nested at most {MAX_DEPTH} arrays or objects deep")
    try:
        orjson.loads(encoded)
    except orjson.JSONDecodeError as exc:
        raise _Wrong("invalid_plot", f"'plot' is not valid JSON: {exc}") from exc
    return plot


# -- the whole body at once ---------------------------------------------------------------------------------


def read_whole(data: bytes, lines: Lines, defaults: dict[str, Any]) -> Events | None:
    """The columns of every line, read by Arrow's JSON reader at once; None where the reader could read a value
    otherwise than orjson (see the module's text). ``lines`` are those ``scan_lines`` found in ``data``: objects, one
    a line, none refused."""
    if not lines.ascii:
        try:
            data.decode()  # the reader takes some text that is not UTF-8 (an encoded surrogate...)
        except UnicodeDecodeError:
            return None
    if lines.backslash and _ASCII_OR_SURROGATE_ESCAPE.search(data):
        return None
    start, end = int(lines.starts[0]), int(lines.ends[-1])
    options = pa_json.ReadOptions(block_size=max(1 << 20, 2 * lines.longest + 2))
    try:
        table = pa_json.read_json(pa.py_buffer(memoryview(data)[start:end]), read_options=options)
    except (pa.ArrowException, ValueError):
        return None  # a line the reader refuses: orjson says which
    if table.num_rows != len(lines) or not _as_orjson_reads(table, data, start, end):
        return None
    try:
        return _events_of(table, defaults)
    except pa.ArrowException:
        return None  # a value the columns cannot hold as the reader typed it: orjson reads it


def _as_orjson_reads(table: pa.Table, data: bytes, start: int, end: int) -> bool:
    """Whether every value of ``table`` is the one orjson reads of the same text."""
    for name, kind in zip(table.column_names, table.schema.types, strict=True):
        if kind not in _READER_TYPES.get(name, ()):
            return False  # a field no event has, or one typed otherwise (a whole float iter, a date-like text...)
    for name in _NULL_IS_NOT_MISSING:
        if name in table.column_names and table[name].null_count:
            # a null is a missing field only where every time the key is written, it has a value
            written = data.count(b'"%s"' % name.encode(), start, end)
            if written != table.num_rows - table[name].null_count:
                return False
    if "value" in table.column_names and pa.types.is_floating(table.schema.field("value").type):
        values = pc.fill_null(table["value"], 1.0).to_numpy()
        # NaN and Infinity are no JSON; an integer -0 is read as the float -0.0, which orjson reads as 0
        if not np.isfinite(values).all() or (np.signbit(values) & (values == 0)).any():
            return False
    return True


def _events_of(table: pa.Table, defaults: dict[str, Any]) -> Events:
    n = table.num_rows
    columns = {
        name: table[name].combine_chunks()
        for name, kind in zip(table.column_names, table.schema.types, strict=True)
        if kind != pa.null()
    }
    events = Events(rows=n)
    kind = [columns.pop(name) for name in ("kind", "type") if name in columns]
    if kind and defaults.get("kind") is not None:
        kind.append(pa.scalar(defaults["kind"], pa.string()))
    if kind:
        columns["kind"] = pc.coalesce(*kind) if len(kind) > 1 else kind[0]
    elif defaults.get("kind") is not None:
        events.constants["kind"] = defaults["kind"]
    for name in ("project", "job", "worker"):
        default = defaults.get(name)
        if name in columns:
            columns[name] = columns[name] if default is None or not columns[name].null_count else (
                pc.fill_null(columns[name], default))  # fmt: skip
        elif default is not None:
            events.constants[name] = default
    for name in ("kind", "project", "job", "worker"):  # the fields the rules encode: one text is a constant
        text = _one_text(columns[name]) if name in columns else None
        if text is not None:
            events.constants[name] = text
            del columns[name]
    if "seq" in columns:
        seq = columns["seq"]
        negative = np.flatnonzero(pc.fill_null(pc.less(seq, 0), False).to_numpy(zero_copy_only=False))
        if len(negative):
            events.wrong["seq"] = [(negative, "invalid_seq", DETAILS["invalid_seq"])]
            seq = pc.if_else(pc.less(seq, 0), None, seq)
        columns["seq"] = seq.cast(pa.uint64())
    if "value" in columns:
        columns["value"] = pc.cast(columns["value"], pa.float64(), safe=False)  # rounded as float(int) rounds
    if "model_event" in columns:
        columns["model_event"] = pc.fill_null(columns["model_event"], False).cast(pa.uint8())
    events.columns.update(columns)
    return events


def _one_text(column: pa.Array) -> str | None:
    """The text every row of a string ``column`` holds, where it is one and no row is null; None otherwise. Read
    from the column's buffers: every text is as long as the first, and each byte of them is the one a text before."""
    if column.null_count or not len(column):
        return None
    rows = len(column)
    offsets = np.frombuffer(column.buffers()[1], np.int32, rows + 1, column.offset * 4)
    size, start = int(offsets[1] - offsets[0]), int(offsets[0])
    if int(offsets[-1]) - start != size * rows or (np.diff(offsets) != size).any():
        return None
    if not size:
        return ""
    text = np.frombuffer(column.buffers()[2], np.uint8, size * rows, start)
    return text[:size].tobytes().decode() if np.array_equal(text[size:], text[:-size]) else None
