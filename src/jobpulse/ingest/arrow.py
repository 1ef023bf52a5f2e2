"""An ingest body as an Arrow IPC stream: one row per event, one column per event field.

The binary counterpart of the columnar form (docs/ingest.md): numbers arrive typed, so a batch of points is read
into the rules' columns without being parsed. Rows carry scalar, system and log events; a row breaking a rule is
counted and dropped as in the other forms, while a column of a type no value of its field has, or one that is no
event field, refuses the whole body.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..errors import BadRequest, PayloadTooLarge
from .batch import Batch
from .rules import DETAILS, Events, check_events

CONTENT_TYPE = "application/vnd.apache.arrow.stream"
KINDS = ("scalar", "system", "log")
_TEXT = ("kind", "project", "job", "worker", "metric", "variant", "device", "level", "msg")
_KNOWN = (*_TEXT, "iter", "ts", "value", "model_event", "seq")
_INT64_MAX = 2**63 - 1


def parse_arrow(data: bytes, defaults: dict[str, Any], batch: Batch, max_events: int, now_ms: int) -> None:
    """Add the events of the Arrow IPC stream ``data`` to ``batch``; ``defaults`` stand in for absent columns and
    nulls (``kind``, ``project``, ``job``, ``worker``)."""
    table = _read(data)
    unknown = [name for name in table.column_names if name not in _KNOWN]
    if unknown:
        fields = ", ".join(_KNOWN)
        raise BadRequest(f"column {unknown[0]!r} is not an event field; fields are {fields}", field=unknown[0])
    if len(set(table.column_names)) != table.num_columns:
        raise BadRequest("an Arrow body names each column once", field="body")
    if table.num_rows == 0:
        raise BadRequest("body holds no events", field="body")
    if table.num_rows > max_events:
        raise PayloadTooLarge(f"a batch holds at most {max_events} events", field="body")
    check_events(events_of(table.combine_chunks(), defaults), batch, now_ms, kinds=KINDS)


def _read(data: bytes) -> pa.Table:
    try:
        table = pa.ipc.open_stream(data).read_all()
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, OSError) as exc:
        raise BadRequest(f"body is not an Arrow IPC stream: {exc}", field="body") from exc
    try:
        table.column_names  # noqa: B018 - decoded here, once: a name that is not UTF-8 refuses the body
    except UnicodeDecodeError as exc:
        raise BadRequest(f"a column name of the Arrow body is not UTF-8: {exc}", field="body") from exc
    try:
        # The reader checks a stream's structure, not its values: an offset or a dictionary index that points
        # outside its buffer would be read as it is and crash the process. 0.15 ms for 100,000 points.
        table.validate(full=True)
    except pa.ArrowInvalid as exc:
        raise BadRequest(f"body is not a valid Arrow IPC stream: {exc}", field="body") from exc
    return table


def events_of(table: pa.Table, defaults: dict[str, Any]) -> Events:
    """The rules' columns of ``table`` (one chunk per column), the defaults applied to the names."""
    events = Events(rows=table.num_rows)
    for name in table.column_names:
        column = table.column(name)
        column = column.chunk(0) if column.num_chunks == 1 else pa.concat_arrays(column.chunks)
        if pa.types.is_null(column.type):
            continue
        events.columns[name] = _CONVERT.get(name, _text)(events, name, column)
    for name in ("kind", "project", "job", "worker"):
        default = defaults.get(name)
        if default is None:
            continue
        if name not in events.columns:
            events.constants[name] = default
        elif events.columns[name].null_count:
            events.columns[name] = pc.fill_null(events.columns[name], default)
    return events


def _text(events: Events, name: str, column: pa.Array) -> pa.Array:
    if pa.types.is_dictionary(column.type):
        column = column.dictionary_decode()
    if not (pa.types.is_string(column.type) or pa.types.is_large_string(column.type)):
        raise BadRequest(f"column {name!r} must hold strings, not {column.type}", field=name)
    return column.cast(pa.string())


def _integers(events: Events, name: str, column: pa.Array) -> pa.Array:
    """``iter``: any integer type, clamped to int64 so that one past it is out of range."""
    if not pa.types.is_integer(column.type):
        raise BadRequest(f"column {name!r} must hold integers", field=name)
    if pa.types.is_unsigned_integer(column.type):
        column = pc.min_element_wise(column.cast(pa.uint64()), pa.scalar(_INT64_MAX, pa.uint64()), skip_nulls=False)
    return column.cast(pa.int64())


def _seqs(events: Events, name: str, column: pa.Array) -> pa.Array:
    if not pa.types.is_integer(column.type):
        raise BadRequest(f"column {name!r} must hold integers", field=name)
    if pa.types.is_signed_integer(column.type):
        negative = pc.fill_null(pc.less(column, 0), False)
        rows = np.flatnonzero(negative.to_numpy(zero_copy_only=False))
        if len(rows):
            events.wrong["seq"] = [(rows, "invalid_seq", DETAILS["invalid_seq"])]
            column = pc.if_else(negative, None, column)
    return column.cast(pa.uint64())


def _timestamps(events: Events, name: str, column: pa.Array) -> pa.Array:
    """Epoch milliseconds from integers, numbers (their fraction dropped) or timestamps of any unit."""
    if pa.types.is_timestamp(column.type):
        return pc.cast(column, pa.timestamp("ms", tz=column.type.tz), safe=False).cast(pa.int64())
    if pa.types.is_integer(column.type):
        return _integers(events, name, column)
    if not pa.types.is_floating(column.type):
        raise BadRequest("column 'ts' must hold epoch milliseconds (integers or numbers) or timestamps", field="ts")
    values = column.cast(pa.float64()).to_numpy(zero_copy_only=False)  # a null reads NaN
    missing = np.isnan(values)
    bad = np.flatnonzero(missing & column.is_valid().to_numpy(zero_copy_only=False))
    if len(bad):
        events.wrong["ts"] = [(bad, "invalid_ts", DETAILS["invalid_ts"])]
    clamped = np.clip(np.where(missing, 0.0, values), -(2.0**63), 2.0**63 - 1024)  # past int64: out of range
    return pa.array(np.trunc(clamped).astype(np.int64), pa.int64(), mask=missing)


def _numbers(events: Events, name: str, column: pa.Array) -> pa.Array:
    if not (pa.types.is_integer(column.type) or pa.types.is_floating(column.type)):
        raise BadRequest(f"column {name!r} must hold numbers", field=name)
    # an integer past 2**53 is rounded to the nearest float, as float(int) rounds it in the other forms
    return pc.cast(column, pa.float64(), safe=False)


def _flags(events: Events, name: str, column: pa.Array) -> pa.Array:
    if not (pa.types.is_boolean(column.type) or pa.types.is_integer(column.type)):
        raise BadRequest("column 'model_event' must hold booleans", field="model_event")
    return pc.cast(column, pa.bool_()).cast(pa.uint8())


_CONVERT = {
    "iter": _integers,
    "seq": _seqs,
    "ts": _timestamps,
    "value": _numbers,
    "model_event": _flags,
}
