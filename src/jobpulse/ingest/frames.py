"""The good events of a body as one Arrow frame per table, and what the batch learns of their jobs and workers."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..store.columns import SCHEMAS
from .batch import Batch

if TYPE_CHECKING:
    from .rules import Events

_MS = pa.timestamp("ms", tz="UTC")
# the worker of an event that names none: the host's processes for logs and samples, none for the rest
_DEFAULT_WORKER = {"scalars": "", "events": "", "logs": "worker-0", "system": "worker-0"}
_FILLS = {"variant": "", "device": "", "url": "", "payload": "", "level": "info", "model_event": 0}
# the fields of each table read from the events (the worker and the time are built for the rows kept)
_FIELDS_READ = {
    table: pa.schema([spec for spec in SCHEMAS[table] if spec.name not in ("worker", "ts")])
    for table in ("scalars", "events", "logs", "system")
}


def add_frames(batch: Batch, events: Events, kept: dict[str, np.ndarray], derived: dict[str, Any]) -> None:
    """Add the ``kept`` rows of each table to ``batch``, the tables in the order their first event came."""
    tables = sorted((int(np.argmax(rows)), table) for table, rows in kept.items() if rows.any())
    for _, table in tables:
        batch.frames.setdefault(table, []).append(_frame(table, events, kept[table], derived))
    if tables:
        _note(batch, kept, derived)


def _frame(table: str, events: Events, kept: np.ndarray, derived: dict[str, Any]) -> pa.Table:
    """The ``kept`` rows of ``table``, each field's default where the event had none."""
    schema, fields = SCHEMAS[table], _FIELDS_READ[table]
    every = bool(kept.all())
    part = pa.Table.from_arrays([_column(spec, events, derived) for spec in fields], schema=fields)
    if not every:
        part = part.filter(pa.array(kept))
    columns = {}
    for spec in fields:
        column = part.column(spec.name)
        fill = _FILLS.get(spec.name)
        columns[spec.name] = (
            pc.fill_null(column, pa.scalar(fill, spec.type)) if fill is not None and column.null_count else column
        )
    columns["worker"] = _workers(derived["codes_of"]("worker"), _DEFAULT_WORKER[table], None if every else kept)
    columns["ts"] = pa.array(derived["ts"] if every else derived["ts"][kept], _MS)
    return pa.Table.from_arrays([columns[spec.name] for spec in schema], schema=schema)


def _column(spec: pa.Field, events: Events, derived: dict[str, Any]) -> pa.Array:
    """A column of every row, of ``spec``'s type."""
    name, n = spec.name, events.rows
    if name == "level" and "level" in derived:
        return derived["level"]
    if name in events.constants:
        return pa.repeat(pa.scalar(events.constants[name], pa.string()), n)
    column = _keys(events, derived) if name == "key" else events.columns.get(name)
    if column is None:
        fill = _FILLS.get(name)
        return pa.nulls(n, spec.type) if fill is None else pa.repeat(pa.scalar(fill, spec.type), n)
    return column if column.type == spec.type else column.cast(spec.type)


def _workers(codes_of: tuple[list[Any], np.ndarray], default: str, kept: np.ndarray | None) -> pa.Array:
    """The worker of each ``kept`` row (of every row for None): its own, else ``default``."""
    values, codes = codes_of
    if kept is not None:
        codes = codes[kept]
    names = [value or default for value in values] + [default]
    if not len(codes) or (codes == codes[0]).all():
        return pa.repeat(pa.scalar(names[codes[0]] if len(codes) else default, pa.string()), len(codes))
    return pa.array(names, pa.string()).take(np.where(codes < 0, len(values), codes))


def _keys(events: Events, derived: dict[str, Any]) -> pa.Array:
    """An image's key: its own, else metric/variant/iter; the other events have none."""
    columns = events.columns
    keys = columns["key"].to_pylist() if "key" in columns else [None] * events.rows
    codes, present = derived["codes"], derived["present"]
    if "image" in present:
        for row in np.flatnonzero(codes == present.index("image")).tolist():
            if not keys[row] and columns["metric"][row].is_valid and columns["iter"][row].is_valid:
                variant = columns["variant"][row].as_py() if "variant" in columns else None
                keys[row] = f"{columns['metric'][row].as_py()}/{variant or ''}/{columns['iter'][row].as_py()}"
    return pa.array([key or "" for key in keys], pa.string())


def _note(batch: Batch, kept: dict[str, np.ndarray], derived: dict[str, Any]) -> None:
    """What the batch keeps of the good events: their jobs in the order they came, each with the first project an
    event names for it, the workers of logs and samples, and each job's earliest time."""
    every = np.logical_or.reduce(list(kept.values()))
    jobs, all_job_codes = derived["codes_of"]("job")
    projects, project_codes = derived["codes_of"]("project")
    job_codes = all_job_codes[every]
    times = derived["ts"][every]
    for code in _first_of_each(job_codes).tolist():
        if batch.jobs.get(jobs[code]) is None:
            named = project_codes[every][(job_codes == code) & (project_codes[every] >= 0)]
            batch.jobs[jobs[code]] = projects[named[0]] if len(named) else None
    if len(jobs) == 1:
        firsts = [int(times.min())]
    else:
        first = np.full(len(jobs), 1 << 62, dtype=np.int64)
        np.minimum.at(first, job_codes, times)
        firsts = first.tolist()
    for job, ts0 in zip(jobs, firsts, strict=True):
        if ts0 < batch.first_ts.get(job, 1 << 62):
            batch.first_ts[job] = ts0
    hosts = [kept[table] for table in ("logs", "system") if table in kept and kept[table].any()]
    if hosts:
        mine = np.logical_or.reduce(hosts)
        values, codes = derived["codes_of"]("worker")
        names = [value or "worker-0" for value in values] + ["worker-0"]
        workers = np.where(codes < 0, len(values), codes)[mine]
        pairs = np.unique(all_job_codes[mine] * len(names) + workers)
        batch.workers.update((jobs[p // len(names)], names[p % len(names)]) for p in pairs.tolist())
    batch.accepted += int(every.sum())


def _first_of_each(codes: np.ndarray) -> np.ndarray:
    """The codes in the order of their first row."""
    if not len(codes) or codes.max() == codes.min():
        return codes[:1]
    values, first = np.unique(codes, return_index=True)
    return values[np.argsort(first)]
