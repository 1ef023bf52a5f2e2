"""The rules every event meets, whichever form carried it (see docs/ingest.md).

Each form (JSON lines, columnar JSON, Arrow) reads its body into ``Events``: one column per event field, in the
types below, with the form's defaults already applied. ``check_events`` then applies one set of checks to those
columns, field by field in the order below, counts every refused row once under the first rule it breaks, and adds
the good rows to a ``Batch`` as one Arrow frame per table.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..store.identity import JOB_ID, PROJECT_ID, WORKER_ID
from ..store.logs import LEVELS
from .batch import MAX_EXAMPLES, Batch
from .frames import add_frames

KINDS = ("scalar", "vector", "plot", "image", "log", "system")
MAX_NAME = 255
MAX_DEVICE = 64
MAX_URL = 2048
MAX_MSG = 1 << 20
MAX_PAYLOAD = 4 << 20
ITER_MIN, ITER_MAX = -(2**31), 2**53
TS_MIN = 946_684_800_000  # 2000-01-01
TS_AHEAD = 7 * 86_400_000
SPECIAL = {
    "NaN": float("nan"),
    "nan": float("nan"),
    "Infinity": float("inf"),
    "inf": float("inf"),
    "-Infinity": float("-inf"),
    "-inf": float("-inf"),
}
_LEVEL_ALIASES = {"warn": "warning", "fatal": "critical", "notset": "info", "trace": "debug", "err": "error"}

# what each rule says when it refuses an event; {value!r} is the refused value
DETAILS = {
    "invalid_kind": "'kind' must be one of {kinds}, got {value!r}",
    "invalid_job": "'job' must be 1-128 letters, digits or '._:-', got {value!r}",
    "invalid_project": "'project' must be 1-64 letters, digits or '-', got {value!r}",
    "invalid_worker": "'worker' must be 1-128 of letters, digits or '._:@/-', got {value!r}",
    "invalid_ts": "'ts' must be epoch milliseconds",
    "ts_out_of_range": "'ts' must be epoch milliseconds between 2000-01-01 and a week from now",
    "invalid_metric": f"'metric' must be a non-empty string of at most {MAX_NAME} characters",
    "invalid_variant": f"'variant' must be a string of at most {MAX_NAME} characters",
    "invalid_iter": "'iter' must be an integer",
    "iter_out_of_range": f"'iter' must be in [{ITER_MIN}, {ITER_MAX}]",
    "invalid_value": '\'value\' must be a number, or "NaN", "Infinity" or "-Infinity"',
    "invalid_device": (
        f"'device' is the accelerator index as a string of at most {MAX_DEVICE} characters, '' for the host"
    ),
    "invalid_seq": "log events need 'seq': an integer >= 0 assigned once by the sender",
    "invalid_msg": "log events need 'msg': a string",
    "msg_too_long": f"a log line is at most {MAX_MSG} characters; split longer output",
    "invalid_level": f"'level' must be one of {', '.join(LEVELS)}",
    "invalid_values": 'vector events need \'values\': an array of numbers, "NaN", "Infinity" or "-Infinity"',
    "invalid_plot": "plot events need 'plot': a Plotly figure object or its JSON",
    "invalid_url": f"image events need 'url': the address of the uploaded file, at most {MAX_URL} characters",
    "invalid_key": f"'key' must be a string of at most {MAX_NAME} characters",
    "payload_too_large": f"an event's payload is at most {MAX_PAYLOAD} bytes",
}
Detail = str | Callable[[int], str]  # a text, or the text for a row (built only for the examples of an answer)
Refusal = tuple[np.ndarray, str, Detail]  # rows, reason, detail


@dataclass
class Events:
    """The events of one body as columns, before the rules: row i is the i-th event of the body.

    Columns hold text as strings, ``iter`` and ``ts`` as int64 (an integer past int64 clamped to it, so that it is
    out of range), ``seq`` as uint64, ``value`` as float64 and ``model_event`` as uint8; a null is a missing value
    and a field no event has may be absent. ``constants`` holds the text fields of one value on every row (the
    query's, where no event names it), which need no column. ``wrong`` holds, per field, the rows whose value is of
    a type the field does not take; ``refused``, the rows refused whole before any field was read (a line that is
    not JSON...).
    """

    rows: int
    columns: dict[str, pa.Array] = field(default_factory=dict)
    constants: dict[str, str] = field(default_factory=dict)
    wrong: dict[str, list[Refusal]] = field(default_factory=dict)
    refused: list[Refusal] = field(default_factory=list)


def level_name(value: Any) -> str | None:
    """The stored spelling of a log level (None for a missing one is "info"); None where it is no level."""
    if value is None:
        return "info"
    if isinstance(value, str):
        level = value.lower()
        level = _LEVEL_ALIASES.get(level, level)
        if level in LEVELS:
            return level
    return None


def detail_of(reason: str, value: Any = None, kinds: tuple[str, ...] = KINDS) -> str:
    return DETAILS[reason].format(value=value, kinds=", ".join(kinds))


def check_events(events: Events, batch: Batch, now_ms: int, kinds: tuple[str, ...] = KINDS) -> None:
    """Apply the rules to ``events``: count the refused rows in ``batch`` and add the good ones to it."""
    rows = _Rows(events)
    for refusal in events.refused:
        rows.drop(*refusal)
    codes, present = rows.kinds(kinds)
    rows.names("job", JOB_ID, required=True)
    rows.names("project", PROJECT_ID)
    rows.names("worker", WORKER_ID)
    derived = {"ts": rows.timestamps(now_ms), "codes": codes, "present": present, "codes_of": rows.codes}
    tables = {}
    for table, table_kinds in TABLE_KINDS.items():
        mine = [i for i, kind in enumerate(present) if kind in table_kinds]
        if mine:
            tables[table] = (
                codes >= 0 if len(mine) == len(present) else np.logical_or.reduce([codes == i for i in mine])
            )
            _CHECKS[table](rows, tables[table], derived)
    rows.count(batch)
    add_frames(batch, events, {table: mine & rows.keep for table, mine in tables.items()}, derived)


TABLE_KINDS = {"scalars": ("scalar",), "events": ("vector", "plot", "image"), "logs": ("log",), "system": ("system",)}


class _Rows:
    """The rows of a body, which of them are still kept, and what refused the others."""

    def __init__(self, events: Events) -> None:
        self.events = events
        self.n = events.rows
        self.everyone = np.ones(self.n, dtype=bool)
        self.no_one = np.zeros(self.n, dtype=bool)
        self.keep = self.everyone.copy()
        self.refusals: list[Refusal] = []
        self._lengths: dict[str, np.ndarray] = {}
        self._codes: dict[str, tuple[list[Any], np.ndarray]] = {}

    # -- recording ---------------------------------------------------------------------------------------

    def drop(self, bad: np.ndarray, reason: str, detail: Detail) -> None:
        """Refuse, for ``reason``, the kept rows that ``bad`` names (a mask, or row numbers)."""
        rows = np.flatnonzero(bad & self.keep) if bad.dtype == bool else bad[self.keep[bad]]
        if len(rows):
            self.keep[rows] = False
            self.refusals.append((rows, reason, detail))

    def drop_wrong(self, name: str, mine: np.ndarray) -> None:
        """Refuse the rows of ``mine`` whose ``name`` is of a type the field does not take."""
        for rows, reason, detail in self.events.wrong.get(name, ()):
            self.drop(rows[mine[rows]], reason, detail)

    def count(self, batch: Batch) -> None:
        """Count the refused rows in ``batch``, with the first rows refused as its examples (the rows of each
        refusal are in order)."""
        for rows, reason, _ in self.refusals:
            batch.errors[reason] += len(rows)
        room = MAX_EXAMPLES - len(batch.examples)
        if room <= 0 or not self.refusals:
            return
        firsts = np.concatenate([rows[:room] for rows, _, _ in self.refusals])
        which = np.concatenate([np.full(min(len(rows), room), i) for i, (rows, _, _) in enumerate(self.refusals)])
        for at in np.argsort(firsts, kind="stable")[:room].tolist():
            row, (_, reason, detail) = int(firsts[at]), self.refusals[which[at]]
            batch.examples.append(
                {"index": row, "reason": reason, "detail": detail(row) if callable(detail) else detail}
            )

    # -- columns -----------------------------------------------------------------------------------------

    def column(self, name: str) -> pa.Array | None:
        if name in self.events.constants:
            return pa.repeat(pa.scalar(self.events.constants[name], pa.string()), self.n)
        return self.events.columns.get(name)

    def lengths(self, name: str) -> np.ndarray:
        """The length in bytes of each text of ``name`` (0 for a null): a bound of its length in characters, which
        ``too_long`` makes exact where it matters."""
        if name not in self._lengths:
            column = self.events.columns.get(name)
            if name in self.events.constants:
                self._lengths[name] = np.full(self.n, len(self.events.constants[name].encode()), dtype=np.int64)
            elif column is None:
                self._lengths[name] = np.zeros(self.n, dtype=np.int64)
            else:
                buffer = column.buffers()[1]
                offsets = np.frombuffer(buffer, np.int32, len(column) + 1, column.offset * 4) if buffer else None
                self._lengths[name] = np.zeros(self.n, dtype=np.int64) if offsets is None else np.diff(offsets)
        return self._lengths[name]

    def too_long(self, name: str, limit: int) -> np.ndarray:
        """Where the text of ``name`` has more than ``limit`` characters."""
        over = self.lengths(name) > limit
        if over.any():  # more bytes than the limit: count the characters of those texts
            rows = np.flatnonzero(over)
            chars = pc.utf8_length(self.column(name).take(pa.array(rows))).to_numpy(zero_copy_only=False)
            over[rows] = chars > limit
        return over

    def nulls(self, name: str) -> np.ndarray:
        """Where ``name`` is missing."""
        if name in self.events.constants:
            return self.no_one
        column = self.events.columns.get(name)
        if column is None:
            return self.everyone
        if not column.null_count:
            return self.no_one
        valid = np.unpackbits(np.frombuffer(column.buffers()[0], np.uint8), bitorder="little")
        return valid[column.offset : column.offset + self.n] == 0

    # -- the rules of every event ------------------------------------------------------------------------

    def codes(self, name: str) -> tuple[list[Any], np.ndarray]:
        """The distinct texts of ``name`` and each row's index among them (-1 for a missing one)."""
        if name not in self._codes:
            column = self.events.columns.get(name)
            if name in self.events.constants:
                self._codes[name] = ([self.events.constants[name]], np.zeros(self.n, dtype=np.int64))
            elif column is None:
                self._codes[name] = ([], np.full(self.n, -1, dtype=np.int64))
            else:
                encoded = pc.dictionary_encode(column)
                codes = _raw(encoded.indices).astype(np.int64)
                codes[self.nulls(name)] = -1
                self._codes[name] = (encoded.dictionary.to_pylist(), codes)
        return self._codes[name]

    def kinds(self, kinds: tuple[str, ...]) -> tuple[np.ndarray, list[str]]:
        """Each row's kind as an index into the kinds present (-1 for none); refuses the rows of no kind or of
        another one."""
        self.drop_wrong("kind", self.everyone)
        values, codes = self.codes("kind")
        self.drop(codes < 0, "invalid_kind", "name the events' kind: a 'kind' field or the 'kind' query parameter")
        present = [kind for kind in kinds if kind in values]
        lookup = np.array([present.index(v) if v in present else -1 for v in values] + [-1], dtype=np.int8)
        of_row = lookup[codes]
        if len(present) < len(values):
            detail = lambda row: detail_of("invalid_kind", values[codes[row]], kinds)  # noqa: E731
            self.drop((of_row < 0) & (codes >= 0), "invalid_kind", detail)
        return of_row, present

    def names(self, name: str, pattern: Any, required: bool = False) -> None:
        """A name (job, project, worker) the pattern matches; a missing one is refused where ``required``. An empty
        worker stands for the kind's default, so it is taken."""
        reason = f"invalid_{name}"
        self.drop_wrong(name, self.everyone)
        values, codes = self.codes(name)
        if required:
            self.drop(codes < 0, reason, detail_of(reason, None))
        allowed = "" if name == "worker" else None
        bad = np.array([v != allowed and not pattern.fullmatch(v) for v in values] + [False])
        if bad.any():
            self.drop(bad[codes], reason, lambda row: detail_of(reason, values[codes[row]]))

    def timestamps(self, now_ms: int) -> np.ndarray:
        """Each row's time in epoch milliseconds, ``now_ms`` where it has none."""
        self.drop_wrong("ts", self.everyone)
        column = self.column("ts")
        if column is None:
            return np.full(self.n, now_ms, dtype=np.int64)
        ts = np.where(self.nulls("ts"), now_ms, _raw(column)) if column.null_count else _raw(column)
        self.drop((ts < TS_MIN) | (ts > now_ms + TS_AHEAD), "ts_out_of_range", DETAILS["ts_out_of_range"])
        return ts

    # -- the rules of some kinds -------------------------------------------------------------------------

    def name(self, name: str, mine: np.ndarray, required: bool) -> None:
        """A metric (``required``: not empty) or a variant of at most MAX_NAME characters."""
        reason = f"invalid_{name}"
        self.drop_wrong(name, mine)
        bad = self.too_long(name, MAX_NAME)
        if required:
            bad |= self.lengths(name) == 0
        self.drop(mine & bad, reason, DETAILS[reason])

    def integers(self, name: str, mine: np.ndarray, low: int, high: int, reasons: tuple[str, str]) -> None:
        """An integer in [low, high]: one of another type or missing is refused for ``reasons[0]``, one out of the
        range for ``reasons[1]``."""
        self.required(name, mine, reasons[0])
        column = self.column(name)
        if column is not None:  # a missing value is refused above: what its slot holds is never read
            values = _raw(column)
            self.drop(mine & ((values < low) | (values > high)), reasons[1], DETAILS[reasons[1]])

    def required(self, name: str, mine: np.ndarray, reason: str) -> None:
        """A field every row of ``mine`` needs, of the type it takes."""
        self.drop_wrong(name, mine)
        self.drop(mine & self.nulls(name), reason, DETAILS[reason])


def _raw(column: pa.Array) -> np.ndarray:
    """The values of a column of fixed width as they lie in its buffer, a null's slot holding anything."""
    dtype, buffer = column.type.to_pandas_dtype(), column.buffers()[1]
    if buffer is None:  # nulls alone
        return np.zeros(len(column), dtype=dtype)
    return np.frombuffer(buffer, dtype, len(column), column.offset * column.type.byte_width)


# -- the rules of each table ------------------------------------------------------------------------------


def _series_point(rows: _Rows, mine: np.ndarray) -> None:
    """What scalars, vectors, plots and images share: a metric, a variant and an iteration."""
    rows.name("metric", mine, required=True)
    rows.name("variant", mine, required=False)
    rows.integers("iter", mine, ITER_MIN, ITER_MAX, ("invalid_iter", "iter_out_of_range"))


def _scalars(rows: _Rows, mine: np.ndarray, derived: dict[str, Any]) -> None:
    _series_point(rows, mine)
    rows.required("value", mine, "invalid_value")


def _events(rows: _Rows, mine: np.ndarray, derived: dict[str, Any]) -> None:
    _series_point(rows, mine)
    codes, present = derived["codes"], derived["present"]
    of = {kind: mine & (codes == present.index(kind)) for kind in ("vector", "plot", "image") if kind in present}
    rows.drop_wrong("payload", mine)
    for kind, reason in (("vector", "invalid_values"), ("plot", "invalid_plot")):
        if kind in of:
            rows.drop(of[kind] & rows.nulls("payload"), reason, DETAILS[reason])
    if "image" in of:
        rows.required("url", of["image"], "invalid_url")
        bad = (rows.lengths("url") == 0) | rows.too_long("url", MAX_URL)
        rows.drop(of["image"] & bad, "invalid_url", DETAILS["invalid_url"])
        rows.drop_wrong("key", of["image"])
        rows.drop(of["image"] & rows.too_long("key", MAX_NAME), "invalid_key", DETAILS["invalid_key"])
    rows.drop(mine & rows.too_long("payload", MAX_PAYLOAD), "payload_too_large", DETAILS["payload_too_large"])


def _logs(rows: _Rows, mine: np.ndarray, derived: dict[str, Any]) -> None:
    rows.required("seq", mine, "invalid_seq")
    rows.required("msg", mine, "invalid_msg")
    rows.drop(mine & rows.too_long("msg", MAX_MSG), "msg_too_long", DETAILS["msg_too_long"])
    rows.drop_wrong("level", mine)
    values, codes = rows.codes("level")
    spelled = [level_name(value) for value in values]
    unknown = np.array([level is None for level in spelled] + [False])
    if unknown.any():
        rows.drop(mine & unknown[codes], "invalid_level", DETAILS["invalid_level"])
    if spelled != values:
        levels = pa.array([level or "info" for level in spelled] + ["info"], pa.string())
        derived["level"] = levels.take(np.where(codes < 0, len(values), codes))


def _system(rows: _Rows, mine: np.ndarray, derived: dict[str, Any]) -> None:
    rows.name("metric", mine, required=True)
    rows.drop_wrong("device", mine)
    rows.drop(mine & rows.too_long("device", MAX_DEVICE), "invalid_device", DETAILS["invalid_device"])
    rows.required("value", mine, "invalid_value")


_CHECKS = {"scalars": _scalars, "events": _events, "logs": _logs, "system": _system}
