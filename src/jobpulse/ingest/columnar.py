"""The columnar JSON form: one object whose ``series`` each hold arrays of points (see docs/ingest.md).

Each series is read into the rules' columns: a field given as an array holds one value per point, any other field
applies to every point of its series. A series that is not an object, holds no point or arrays of unequal lengths is
refused whole (each of its points counted); the points of the others are checked one by one as every event is.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import orjson
import pyarrow as pa

from ..errors import BadRequest, PayloadTooLarge
from .batch import Batch
from .fields import column
from .rules import Events, Refusal, check_events

KINDS = ("scalar", "system", "log")
POINT_FIELDS = ("value", "iter", "ts", "seq", "msg", "level")  # the fields that may hold one value per point
SERIES_FIELDS = ("kind", "project", "job", "worker", "metric", "variant", "device", "model_event")
_FIELDS = SERIES_FIELDS + POINT_FIELDS


def parse_columnar(data: bytes, defaults: dict[str, Any], batch: Batch, max_events: int, now_ms: int) -> None:
    """Add the points of the columnar body ``data`` to ``batch``."""
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
    events = _Series(merged)
    for series in doc["series"]:
        events.add(series, max_events)
    if events.rows == 0:
        raise BadRequest("body holds no events", field="series")
    check_events(events.events(), batch, now_ms, kinds=KINDS)


class _Series:
    """The columns of the series read so far."""

    def __init__(self, defaults: dict[str, Any]) -> None:
        self.defaults = defaults
        self.rows = 0
        self.parts: dict[str, list[pa.Array]] = {name: [] for name in _FIELDS}
        self.wrong: dict[str, list[Refusal]] = {}
        self.refused: list[Refusal] = []

    def add(self, series: Any, max_events: int) -> None:
        n = _length(series) if isinstance(series, dict) else 0
        if self.rows + max(n, 1) > max_events:
            raise PayloadTooLarge(f"a batch holds at most {max_events} events", field="body")
        if not isinstance(series, dict):
            self._refuse(1, "invalid_series", "each entry of 'series' is an object")
        elif n == 0:
            self._refuse(1, "empty_series", "a series needs arrays of at least one point")
        else:
            uneven = next((name for name in POINT_FIELDS if _uneven(series.get(name), n)), None)
            if uneven is not None:
                detail = f"'{uneven}' has {len(series[uneven])} entries, the series has {n}"
                self._refuse(n, "length_mismatch", detail)
            else:
                self._points(series, n)

    def _refuse(self, n: int, reason: str, detail: str) -> None:
        self.refused.append((np.arange(self.rows, self.rows + n), reason, detail))
        for parts in self.parts.values():
            parts.append(pa.nulls(n))
        self.rows += n

    def _points(self, series: dict[str, Any], n: int) -> None:
        for name in _FIELDS:
            if name in ("kind", "project", "job", "worker"):
                value = series.get(name, self.defaults.get(name))
            else:
                value = series.get(name, "" if name == "device" else None)
            if isinstance(value, list) and name in POINT_FIELDS:
                array, wrong = column(name, value, KINDS)
            else:
                array, wrong = column(name, [value], KINDS)
                array = pa.repeat(array[0], n) if array.null_count == 0 else pa.nulls(n, array.type)
                wrong = [(np.arange(n), reason, _first(detail)) for _, reason, detail in wrong]
            self.parts[name].append(array)
            for rows, reason, detail in wrong:
                self.wrong.setdefault(name, []).append((rows + self.rows, reason, _shifted(detail, self.rows)))
        self.rows += n

    def events(self) -> Events:
        columns = {}
        for name, parts in self.parts.items():
            typed = next((p.type for p in parts if not pa.types.is_null(p.type)), None)
            if typed is not None:
                columns[name] = pa.concat_arrays([p.cast(typed) for p in parts])
        return Events(rows=self.rows, columns=columns, wrong=self.wrong, refused=self.refused)


def _length(series: dict[str, Any]) -> int:
    for name in ("value", "iter", "ts", "seq", "msg"):
        if isinstance(series.get(name), list):
            return len(series[name])
    return 0


def _uneven(value: Any, n: int) -> bool:
    return isinstance(value, list) and len(value) != n


def _first(detail: Any) -> Any:
    """The detail of a series' single value, for every point of it."""
    return (lambda row: detail(0)) if callable(detail) else detail


def _shifted(detail: Any, base: int) -> Any:
    """A detail of the rows of one series, for the rows of the whole body."""
    return (lambda row: detail(row - base)) if callable(detail) else detail
