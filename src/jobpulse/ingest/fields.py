"""JSON values of one event field, one per event, as a column of ``Events`` (see rules.py).

The JSON-lines and columnar forms read their bodies into Python values; each function here turns the values of one
field into the column type the rules read, and names the rows whose value is of a type the field does not take.
Lists of one type go to Arrow at once; only a list holding another type is looked at value by value.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pyarrow as pa

from .rules import KINDS, SPECIAL, Refusal, detail_of

_NONE = type(None)
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1
Column = tuple[pa.Array, list[Refusal]]
# the fields whose refusal names the value given
_NAMED = ("kind", "job", "project", "worker")


def column(name: str, values: list[Any], kinds: tuple[str, ...] = KINDS) -> Column:
    """The column of field ``name`` for ``values`` (None: missing), and the rows of a type it does not take."""
    return _CONVERTERS[name](name, values, kinds)


def _text(name: str, values: list[Any], kinds: tuple[str, ...]) -> Column:
    if values and type(values[0]) is str and values.count(values[0]) == len(values):  # the query's, mostly
        return pa.repeat(pa.scalar(values[0], pa.string()), len(values)), []
    types = set(map(type, values))
    if types <= {str, _NONE}:
        return pa.array(values, pa.string()), []
    bad = [i for i, v in enumerate(values) if v is not None and type(v) is not str]
    reason = f"invalid_{name}"
    detail: Any = _named(reason, values, kinds) if name in _NAMED else detail_of(reason)
    return pa.array(_blanked(values, bad), pa.string()), [(np.array(bad), reason, detail)]


def _devices(name: str, values: list[Any], kinds: tuple[str, ...]) -> Column:
    """The accelerator index as a string; an integer (not a bool) is written as one, a null is refused."""
    types = set(map(type, values))
    if types <= {str}:
        return pa.array(values, pa.string()), []
    spelled = [str(v) if type(v) is int else v for v in values]
    bad = [i for i, v in enumerate(spelled) if type(v) is not str]
    return _with_bad(pa.array(_blanked(spelled, bad), pa.string()), bad, "invalid_device")


def _iters(name: str, values: list[Any], kinds: tuple[str, ...]) -> Column:
    """Integers (a whole float is one), clamped to int64 so that one past it is out of range."""
    if set(map(type, values)) <= {int, _NONE}:
        try:
            return pa.array(values, pa.int64()), []
        except (OverflowError, pa.ArrowInvalid):
            pass
    out, bad = [], []
    for i, v in enumerate(values):
        if type(v) is float and v.is_integer():
            v = int(v)
        if v is None or type(v) is int:
            out.append(v if v is None else min(max(v, _INT64_MIN), _INT64_MAX))
        else:
            out.append(None)
            bad.append(i)
    return _with_bad(pa.array(out, pa.int64()), bad, "invalid_iter")


def _timestamps(name: str, values: list[Any], kinds: tuple[str, ...]) -> Column:
    """Epoch milliseconds: an integer, or a number whose fraction is dropped."""
    if set(map(type, values)) <= {int, _NONE}:
        try:
            return pa.array(values, pa.int64()), []
        except (OverflowError, pa.ArrowInvalid):
            pass
    out, bad = [], []
    for i, v in enumerate(values):
        if type(v) is float and v == v:
            v = _INT64_MAX if v >= 2**63 else _INT64_MIN if v < -(2**63) else int(v)
        if v is None or type(v) is int:
            out.append(v if v is None else min(max(v, _INT64_MIN), _INT64_MAX))
        else:
            out.append(None)
            bad.append(i)
    return _with_bad(pa.array(out, pa.int64()), bad, "invalid_ts")


def _seqs(name: str, values: list[Any], kinds: tuple[str, ...]) -> Column:
    """Integers in [0, 2**64)."""
    if set(map(type, values)) <= {int, _NONE}:
        try:
            return pa.array(values, pa.uint64()), []
        except (OverflowError, pa.ArrowInvalid):
            pass
    bad = [i for i, v in enumerate(values) if v is not None and (type(v) is not int or not 0 <= v < 2**64)]
    return _with_bad(pa.array(_blanked(values, bad), pa.uint64()), bad, "invalid_seq")


def _numbers(name: str, values: list[Any], kinds: tuple[str, ...]) -> Column:
    """Numbers as float64 (an integer as float(int) rounds it), and "NaN", "Infinity", "-Infinity"."""
    types = set(map(type, values))
    if types <= {float, int, _NONE}:
        try:
            return pa.array(values, pa.float64()), []
        except (OverflowError, pa.ArrowInvalid, pa.ArrowTypeError):
            pass
    out, bad = [], []
    for i, v in enumerate(values):
        kind = type(v)
        if kind is float or v is None:
            out.append(v)
        elif kind is int:
            out.append(float(v))
        elif kind is str and v in SPECIAL:
            out.append(SPECIAL[v])
        else:
            out.append(None)
            bad.append(i)
    return _with_bad(pa.array(out, pa.float64()), bad, "invalid_value")


def _flags(name: str, values: list[Any], kinds: tuple[str, ...]) -> Column:
    """``model_event``: 1 where the value is true in Python's sense, as it always was."""
    if set(map(type, values)) <= {_NONE}:
        return pa.nulls(len(values), pa.uint8()), []
    flags = np.fromiter((bool(v) for v in values), dtype=np.uint8, count=len(values))
    return pa.array(flags, pa.uint8()), []


def _with_bad(array: pa.Array, bad: list[int], reason: str) -> Column:
    return array, ([(np.array(bad, dtype=np.int64), reason, detail_of(reason))] if bad else [])


def _blanked(values: list[Any], bad: list[int]) -> list[Any]:
    if not bad:
        return values
    out = list(values)
    for i in bad:
        out[i] = None
    return out


def _named(reason: str, values: list[Any], kinds: tuple[str, ...]) -> Callable[[int], str]:
    return lambda row: detail_of(reason, values[row], kinds)


_CONVERTERS: dict[str, Callable[[str, list[Any], tuple[str, ...]], Column]] = {
    **{name: _text for name in ("kind", "project", "job", "worker", "metric", "variant", "level", "msg", "url", "key")},
    "device": _devices,
    "iter": _iters,
    "ts": _timestamps,
    "seq": _seqs,
    "value": _numbers,
    "model_event": _flags,
}
FIELDS = tuple(_CONVERTERS)
