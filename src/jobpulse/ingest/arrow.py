"""An ingest body as an Arrow IPC stream: one row per event, one column per event field.

The binary counterpart of the columnar form (docs/ingest.md): numbers arrive typed, so a batch of
points is checked column by column and handed on without being parsed. Rows carry scalar, system and
log events; a row breaking a rule is counted and dropped as in the other forms, while a column of the
wrong type, or one that is no event field, refuses the whole body.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..errors import BadRequest, PayloadTooLarge
from ..store.columns import SCHEMAS
from ..store.jobs import JOB_ID, PROJECT_ID, WORKER_ID
from ..store.series import one_value
from .batch import MAX_EXAMPLES, Batch
from .rules import ITER_MAX, ITER_MIN, MAX_MSG, MAX_NAME, TS_AHEAD, TS_MIN, _level, _Reject

CONTENT_TYPE = "application/vnd.apache.arrow.stream"
_TABLES = {"scalar": "scalars", "system": "system", "log": "logs"}
_KNOWN = (
    "kind", "project", "job", "worker", "metric", "variant", "iter", "ts", "value", "model_event", "device",
    "seq", "level", "msg",
)  # fmt: skip
_MS = pa.timestamp("ms", tz="UTC")


def parse_arrow(data: bytes, defaults: dict[str, Any], batch: Batch, max_events: int, now_ms: int) -> None:
    """Add the events of the Arrow IPC stream ``data`` to ``batch``; ``defaults`` stand in for absent columns
    (``kind``, ``project``, ``job``, ``worker``)."""
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
        # outside its buffer would be read as it is by the checks below and crash the process. 0.15 ms for
        # 100,000 points.
        table.validate(full=True)
    except pa.ArrowInvalid as exc:
        raise BadRequest(f"body is not a valid Arrow IPC stream: {exc}", field="body") from exc
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
    add_events(table, defaults, batch, now_ms)


def add_events(table: pa.Table, defaults: dict[str, Any], batch: Batch, now_ms: int) -> None:
    """Check the rows of ``table`` (columns named as event fields, none repeated) and add the good ones to ``batch``."""
    rows = _Rows(table, defaults, batch)
    kinds = rows.text("kind")
    if kinds is None:
        rows.drop(rows.keep, "invalid_kind", "name the events' kind: a 'kind' column or the 'kind' query parameter")
        return
    rows.drop(pc.is_null(kinds), "invalid_kind", "every row needs a 'kind'")
    present = [kind for kind in _distinct(kinds) if kind is not None]
    for kind in present:
        if kind not in _TABLES:
            rows.drop(pc.equal(kinds, kind), "invalid_kind", "Arrow bodies carry events of kind scalar, system or log")
    jobs = rows.checked_names("job", JOB_ID, "invalid_job", "'job' must be 1-128 letters, digits or '._:-'")
    projects = rows.checked_names(
        "project", PROJECT_ID, "invalid_project", "'project' must be 1-64 letters, digits or '-'", optional=True
    )
    workers = rows.checked_names(
        "worker", WORKER_ID, "invalid_worker", "'worker' must be 1-128 of letters, digits or '._:@/-'", optional=True
    )
    ts = rows.timestamps(now_ms)
    for kind in _TABLES:
        if kind not in present:
            continue
        mine = rows.keep.copy() if len(present) == 1 else _true(pc.equal(kinds, kind)) & rows.keep
        if mine.any():
            _add_kind(rows, kind, mine, jobs, projects, workers, ts)


class _Rows:
    """The body's rows, which of them are still kept, and the checks every kind shares."""

    def __init__(self, table: pa.Table, defaults: dict[str, Any], batch: Batch) -> None:
        self.table = table.combine_chunks()
        self.defaults = defaults
        self.batch = batch
        self.keep = np.ones(table.num_rows, dtype=bool)
        self._repeated: dict[str, pa.Array] = {}

    def column(self, name: str) -> pa.Array | None:
        """The column ``name``; None where the body has none, or one of nulls alone (Arrow's null type)."""
        if name not in self.table.column_names or pa.types.is_null(self.table.schema.field(name).type):
            return None
        column = self.table.column(name)
        return column.chunk(0) if column.num_chunks == 1 else pa.concat_arrays(column.chunks)

    def text(self, name: str) -> pa.Array | None:
        """A text column as strings, its nulls replaced by the query's default for ``name`` where there is
        one; None where the body has neither column nor default."""
        column = self.column(name)
        default = self.defaults.get(name)
        if column is None:
            return None if default is None else self.repeated(default)
        if pa.types.is_dictionary(column.type):
            column = column.dictionary_decode()
        if not (pa.types.is_string(column.type) or pa.types.is_large_string(column.type)):
            raise BadRequest(f"column {name!r} must hold strings, not {column.type}", field=name)
        column = column.cast(pa.string())
        return column if default is None or not column.null_count else pc.fill_null(column, default)

    def repeated(self, text: str) -> pa.Array:
        if text not in self._repeated:
            self._repeated[text] = pa.repeat(pa.scalar(text, pa.string()), self.table.num_rows)
        return self._repeated[text]

    def numbers(self, name: str, integers: bool) -> pa.Array | None:
        column = self.column(name)
        if column is None:
            return None
        accepted = pa.types.is_integer(column.type) or (not integers and pa.types.is_floating(column.type))
        if not accepted:
            raise BadRequest(f"column {name!r} must hold {'integers' if integers else 'numbers'}", field=name)
        return column

    def drop(self, bad: pa.Array | np.ndarray, reason: str, detail: str) -> None:
        """Count the kept rows where ``bad`` is true as rejected for ``reason``; they are no longer kept."""
        if isinstance(bad, (pa.Array, pa.ChunkedArray)):
            bad = pc.fill_null(bad, True).to_numpy(zero_copy_only=False)
        rows = np.flatnonzero(bad & self.keep)
        if not len(rows):
            return
        self.keep[rows] = False
        self.batch.errors[reason] += len(rows)
        for index in rows[: max(0, MAX_EXAMPLES - len(self.batch.examples))]:
            self.batch.examples.append({"index": int(index), "reason": reason, "detail": detail})

    def checked_names(self, name: str, pattern: Any, reason: str, detail: str, optional: bool = False) -> pa.Array:
        values = self.text(name)
        default = self.defaults.get(name)
        if name not in self.table.column_names and isinstance(default, str) and pattern.match(default):
            return values  # the query's value for every row, and a good one
        if values is None:
            if not optional:
                self.drop(np.ones(self.table.num_rows, dtype=bool), reason, f"{detail}; the body names no {name}")
            return pa.nulls(self.table.num_rows, pa.string())
        if not optional:
            self.drop(pc.is_null(values), reason, detail)
        for value in _distinct(values):
            if value is not None and (not pattern.match(value) if value else not optional):
                self.drop(pc.equal(values, value), reason, f"{detail}, got {value!r}")
        return values

    def timestamps(self, now_ms: int) -> np.ndarray:
        column = self.column("ts")
        if column is None:
            return np.full(self.table.num_rows, now_ms, dtype=np.int64)
        if pa.types.is_timestamp(column.type):
            column = pc.cast(column, pa.timestamp("ms", tz=column.type.tz), safe=False).cast(pa.int64())
        elif pa.types.is_floating(column.type):
            column = pc.floor(column.cast(pa.float64()))
        elif pa.types.is_integer(column.type):
            column = pc.cast(column, pa.int64(), safe=False)  # past int64: negative, so out of range below
        else:
            raise BadRequest("column 'ts' must hold epoch milliseconds (integers or numbers) or timestamps", field="ts")
        values = pc.fill_null(column, now_ms).to_numpy(zero_copy_only=False)
        self.drop(~np.isfinite(values), "invalid_ts", "'ts' must be epoch milliseconds")
        safe = np.where(self.keep, values, now_ms)
        self.drop(
            (safe < TS_MIN) | (safe > now_ms + TS_AHEAD),
            "ts_out_of_range",
            "'ts' must be epoch milliseconds between 2000-01-01 and a week from now",
        )
        return np.where(self.keep, safe, now_ms).astype(np.int64)


def _add_kind(
    rows: _Rows,
    kind: str,
    mine: np.ndarray,
    jobs: pa.Array,
    projects: pa.Array,
    workers: pa.Array,
    ts: np.ndarray,
) -> None:
    """Check the fields of ``kind`` on its rows (``mine``) and add the rows still kept to the batch."""
    columns: dict[str, Any] = {}
    if kind in ("scalar", "system"):
        metric = rows.text("metric")
        if metric is None:
            rows.drop(mine, "invalid_metric", f"{kind} events need 'metric'")
            return
        length = _lengths(metric)
        detail = f"'metric' must be a non-empty string of at most {MAX_NAME} characters"
        rows.drop(mine & ((length == 0) | (length > MAX_NAME)), "invalid_metric", detail)
        values = rows.numbers("value", integers=False)
        if values is None:
            rows.drop(mine, "invalid_value", f"{kind} events need 'value'")
            return
        rows.drop(mine & _nulls(values), "invalid_value", "'value' must be a number")
        # an integer past 2**53 is rounded to the nearest float, as float(int) rounds it in the other forms
        columns.update(metric=metric, value=pc.cast(values, pa.float64(), safe=False))
    if kind == "scalar":
        iters = rows.numbers("iter", integers=True)
        if iters is None:
            rows.drop(mine, "invalid_iter", "scalar events need an integer 'iter'")
            return
        rows.drop(mine & _nulls(iters), "invalid_iter", "scalar events need an integer 'iter'")
        outside = _outside(iters, ITER_MIN, ITER_MAX)
        rows.drop(mine & outside, "iter_out_of_range", f"'iter' must be in [{ITER_MIN}, {ITER_MAX}]")
        variant = rows.text("variant")
        variant = rows.repeated("") if variant is None else pc.fill_null(variant, "")
        detail = f"'variant' must be at most {MAX_NAME} characters"
        rows.drop(mine & (_lengths(variant) > MAX_NAME), "invalid_variant", detail)
        flags = rows.column("model_event")
        if flags is None:
            flags = pa.repeat(pa.scalar(0, pa.uint8()), len(mine))
        elif pa.types.is_boolean(flags.type) or pa.types.is_integer(flags.type):
            flags = pc.fill_null(pc.cast(flags, pa.bool_()), False).cast(pa.uint8())
        else:
            raise BadRequest("column 'model_event' must hold booleans", field="model_event")
        columns.update(variant=variant, iter=pc.cast(iters, pa.int64(), safe=False), model_event=flags)
    elif kind == "system":
        device = rows.text("device")
        device = rows.repeated("") if device is None else pc.fill_null(device, "")
        detail = "'device' is the accelerator index as a string of at most 64 characters, '' for the host"
        rows.drop(mine & (_lengths(device) > 64), "invalid_device", detail)
        columns["device"] = device
    elif kind == "log":
        seq = rows.numbers("seq", integers=True)
        detail = "log events need 'seq': an integer >= 0 assigned once by the sender"
        if seq is None:
            rows.drop(mine, "invalid_seq", detail)
            return
        rows.drop(mine & (_nulls(seq) | _outside(seq, 0, 2**64 - 1)), "invalid_seq", detail)
        msg = rows.text("msg")
        if msg is None:
            rows.drop(mine, "invalid_msg", "log events need 'msg'")
            return
        rows.drop(mine & _nulls(msg), "invalid_msg", "log events need 'msg'")
        detail = f"a log line is at most {MAX_MSG} characters; split longer output"
        rows.drop(mine & (_lengths(msg) > MAX_MSG), "msg_too_long", detail)
        columns.update(seq=pc.cast(seq, pa.uint64(), safe=False), msg=msg, level=_levels(rows, mine))
    kept = mine & rows.keep
    if not kept.any():
        return
    default_worker = "" if kind == "scalar" else "worker-0"
    worker = _one(workers)
    if worker is not None:
        workers = rows.repeated(worker[0] or default_worker)
    else:
        named = pc.fill_null(workers, "")
        workers = pc.if_else(pc.equal(named, ""), default_worker, named)
    columns.update(job=jobs, worker=workers, ts=pa.array(ts, pa.int64()).cast(_MS))
    schema = SCHEMAS[_TABLES[kind]]
    where = None if kept.all() else pa.array(kept)
    frame = pa.Table.from_arrays(
        [(columns[f.name] if where is None else columns[f.name].filter(where)).cast(f.type) for f in schema],
        schema=schema,
    )
    constants = {name: _one(column) for name, column in (("job", jobs), ("worker", workers), ("project", projects))}
    _note(rows.batch, kind, frame, projects if where is None else projects.filter(where), constants)


def _outside(integers: pa.Array, low: int, high: int) -> np.ndarray:
    """Where an integer column of any width and sign lies outside [low, high] (``low`` <= 0)."""
    if pa.types.is_unsigned_integer(integers.type):
        values = pc.fill_null(integers.cast(pa.uint64()), 0).to_numpy()
        return values > np.uint64(min(high, 2**64 - 1))
    values = pc.fill_null(integers.cast(pa.int64()), 0).to_numpy()
    return (values < low) | (values > min(high, 2**63 - 1))


def _nulls(values: pa.Array) -> np.ndarray:
    return pc.is_null(values).to_numpy(zero_copy_only=False)


def _true(condition: pa.Array) -> np.ndarray:
    return pc.fill_null(condition, False).to_numpy(zero_copy_only=False)


def _lengths(text: pa.Array) -> np.ndarray:
    return pc.fill_null(pc.utf8_length(text), 0).to_numpy(zero_copy_only=False)


def _levels(rows: _Rows, mine: np.ndarray) -> pa.Array:
    levels = rows.text("level")
    if levels is None:
        return rows.repeated("info")
    levels = pc.fill_null(levels, "info")
    spelled = {}
    for value in _distinct(levels):
        try:
            spelled[value] = _level(value)
        except _Reject as bad:
            rows.drop(mine & _true(pc.equal(levels, value)), bad.reason, bad.detail)
    keys = pa.array(list(spelled), pa.string())
    return pc.take(pa.array(list(spelled.values()), pa.string()), pc.index_in(levels, keys))


def _note(
    batch: Batch,
    kind: str,
    frame: pa.Table,
    projects: pa.Array,
    constants: dict[str, tuple[str | None] | None],
) -> None:
    """What ``Batch.add`` does for each event, done once for a kind's rows; ``constants`` holds ``_one`` of
    the job, project and worker columns."""
    batch.frames.setdefault(_TABLES[kind], []).append(frame)
    jobs, job_codes = _codes(frame.column("job"), constants["job"])
    names, project_codes = _codes(projects, constants["project"])
    if len(jobs) == 1 and len(names) <= 1:  # the usual body: one job, with one project or none
        if batch.jobs.get(jobs[0]) is None:
            batch.jobs[jobs[0]] = names[0] if names else None
        pairs = np.zeros(0, dtype=np.int64)
    else:
        pairs = np.sort(np.unique(job_codes * (len(names) + 1) + project_codes, return_index=True)[1])
    for row in pairs.tolist():  # in the order the rows came
        job = jobs[job_codes[row]]
        if batch.jobs.get(job) is None:
            batch.jobs[job] = names[project_codes[row]] if project_codes[row] >= 0 else None
    if kind != "scalar":
        workers, worker_codes = _codes(frame.column("worker"), constants["worker"])
        pairs = np.unique(job_codes * len(workers) + worker_codes)
        batch.workers.update((jobs[p // len(workers)], workers[p % len(workers)]) for p in pairs.tolist())
    ts = frame.column("ts").cast(pa.int64()).to_numpy()
    if len(jobs) == 1:
        first = np.array([ts.min()])
    else:
        first = np.full(len(jobs), 1 << 62, dtype=np.int64)
        np.minimum.at(first, job_codes, ts)
    for job, ts0 in zip(jobs, first.tolist(), strict=True):
        if ts0 < batch.first_ts.get(job, 1 << 62):
            batch.first_ts[job] = ts0
    batch.accepted += frame.num_rows


def _codes(text: pa.Array | pa.ChunkedArray, constant: tuple[str | None] | None = None) -> tuple[list[Any], np.ndarray]:
    """The distinct values of ``text`` and each row's index among them (-1 for a null); ``constant`` is the
    value of every row where it is known."""
    if constant is not None:
        value = constant[0]
        return ([], np.full(len(text), -1)) if value is None else ([value], np.zeros(len(text), dtype=np.int64))
    encoded = pc.dictionary_encode(text)
    if isinstance(encoded, pa.ChunkedArray):
        encoded = encoded.combine_chunks()
    codes = pc.fill_null(encoded.indices, -1).to_numpy(zero_copy_only=False).astype(np.int64)
    return encoded.dictionary.to_pylist(), codes


def _one(values: pa.Array) -> tuple[str | None] | None:
    """``(text,)`` where every row of a text column holds ``text``, ``(None,)`` where every row is null, None
    otherwise: a query's value repeated, mostly, which need not be hashed row by row."""
    if len(values) and values.null_count == len(values):
        return (None,)
    value = one_value(values)
    return None if value is None else (value,)


def _distinct(values: pa.Array | None) -> list[Any]:
    """The distinct values of a column, in the order they first come."""
    if values is None:
        return []
    known = _one(values)
    return list(known) if known is not None else pc.unique(values).to_pylist()
