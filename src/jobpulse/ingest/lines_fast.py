"""The fast path of JSON lines: a body of valid scalar, log and system events, checked and built column by column.

Each line is still parsed by ``orjson.loads`` on its own (``lines.load_lines``), exactly as the per-line path does, so
both see the same values (and a body left to the per-line path is not parsed twice). What is vectorised is everything
after: the kinds, identities, names, numbers and timestamps are checked per column (each distinct string once, numbers
as numpy arrays) and the rows are built as Arrow tables at once.

This path decides nothing on its own. A body it cannot take whole (any bad line, a vector, plot or image event, a value
of a type it does not expect...) is left untouched for the per-line path of ``lines.py``, which answers as it always
did. So every check here implies that the rules of ``rules.py`` pass for every line, and every value built is the one
those rules would store.
"""

from __future__ import annotations

from operator import itemgetter
from typing import Any

import numpy as np
import pyarrow as pa

from ..store.columns import SCHEMAS
from ..store.jobs import JOB_ID, PROJECT_ID, WORKER_ID
from .batch import Batch
from .rules import _SPECIAL, ITER_MAX, ITER_MIN, MAX_MSG, MAX_NAME, TS_AHEAD, TS_MIN, _level, _Reject

TABLES = {"scalar": "scalars", "log": "logs", "system": "system"}
_NONE = type(None)
_MS = pa.timestamp("ms", tz="UTC")


class _Undecided(Exception):
    """The body needs the per-line path."""


def add_events_fast(events: list, defaults: dict, batch: Batch, now_ms: int) -> bool:
    """Add the parsed lines of a body to ``batch`` when every one is a valid scalar, log or system event: True.

    Otherwise answer False and leave ``batch`` as it was: the per-line path then decides.
    """
    if not events or set(map(type, events)) != {dict}:
        return False
    try:
        built = _Built(events, defaults, now_ms)
    # besides _Undecided: int(NaN), an int past int64, an unhashable value in a set, a string that is no number...
    except (_Undecided, ValueError, TypeError, OverflowError, KeyError):
        return False
    built.commit(batch)
    return True


class _Built:
    """Every event checked and turned into a frame per table; nothing is written to a batch before ``commit``."""

    def __init__(self, events: list[dict], defaults: dict, now_ms: int) -> None:
        self.n = len(events)
        kinds = [e.get("kind") for e in events]
        kind_set = _distinct_strings(kinds, none=True)
        if None in kind_set:  # a missing (or null) kind: the event's 'type', or the query's kind, stands for it
            kinds = [e.get("kind", e.get("type", defaults.get("kind"))) for e in events]
            kind_set = _distinct_strings(kinds, none=False)
        if not kind_set.issubset(TABLES):
            raise _Undecided
        job, project, worker = defaults.get("job"), defaults.get("project"), defaults.get("worker")
        self.jobs = [e.get("job", job) for e in events]
        self.job_set = _distinct_strings(self.jobs, none=False)
        if not all(JOB_ID.match(job) for job in self.job_set):
            raise _Undecided
        self.projects = [e.get("project", project) for e in events]
        self.project_set = _distinct_strings(self.projects, none=True)
        if not all(project is None or PROJECT_ID.match(project) for project in self.project_set):
            raise _Undecided
        workers = [e.get("worker", worker) for e in events]
        worker_set = _distinct_strings(workers, none=True)
        if not all(w is None or w == "" or WORKER_ID.match(w) for w in worker_set):
            raise _Undecided
        self.ts = _timestamps([e.get("ts") for e in events], now_ms)
        self.frames: dict[str, pa.Table] = {}
        self.worker_pairs: set[tuple[str, str]] = set()
        # the tables in the order their first event came, as the per-line path adds them
        order = list(dict.fromkeys(kinds)) if len(kind_set) > 1 else list(kind_set)
        codes = np.fromiter(map(order.index, kinds), dtype=np.int8, count=self.n) if len(order) > 1 else None
        for code, kind in enumerate(order):
            at = None if codes is None else np.flatnonzero(codes == code).tolist()
            jobs, kind_workers = _pick(self.jobs, at), _pick(workers, at)
            # a missing or empty worker is "worker-0" for logs and system samples, "" for the rest
            default_worker = "" if kind == "scalar" else "worker-0"
            kind_worker_set = {w or default_worker for w in worker_set}
            if kind_worker_set != worker_set:
                kind_workers = [w or default_worker for w in kind_workers]
            if kind != "scalar":
                if len(self.job_set) == 1 and len(kind_worker_set) == 1:
                    self.worker_pairs.add((jobs[0], kind_workers[0]))
                else:
                    self.worker_pairs.update(zip(jobs, kind_workers, strict=True))
            columns = {
                "job": _strings(jobs, self.job_set),
                "worker": _strings(kind_workers, kind_worker_set),
                "ts": pa.array(self.ts if at is None else self.ts[at], type=_MS),
                **{"scalar": _scalars, "log": _logs, "system": _system}[kind](_pick(events, at)),
            }
            schema = SCHEMAS[TABLES[kind]]
            self.frames[TABLES[kind]] = pa.Table.from_arrays([columns[f.name] for f in schema], schema=schema)

    def commit(self, batch: Batch) -> None:
        """What ``Batch.add`` does for each event, done once for the body."""
        for table, frame in self.frames.items():
            batch.frames.setdefault(table, []).append(frame)
        if len(self.job_set) == 1 and len(self.project_set) == 1:
            pairs: Any = [(self.jobs[0], self.projects[0])]
        else:
            pairs = dict.fromkeys(zip(self.jobs, self.projects, strict=True))  # in the order they first came
        for job, project in pairs:
            if batch.jobs.get(job) is None:  # the first project an event of the job names
                batch.jobs[job] = project
        batch.workers.update(self.worker_pairs)
        for job, ts0 in self._first_ts().items():
            if ts0 < batch.first_ts.get(job, 1 << 62):
                batch.first_ts[job] = ts0
        batch.accepted += self.n

    def _first_ts(self) -> dict[str, int]:
        if len(self.job_set) == 1:
            return {self.jobs[0]: int(self.ts.min())}
        index = {job: i for i, job in enumerate(dict.fromkeys(self.jobs))}
        codes = np.fromiter(map(index.__getitem__, self.jobs), dtype=np.intp, count=self.n)
        first = np.full(len(index), 1 << 62, dtype=np.int64)
        np.minimum.at(first, codes, self.ts)
        return {job: int(first[i]) for job, i in index.items()}


def _scalars(events: list[dict]) -> dict[str, pa.Array]:
    return {
        "metric": _names([e.get("metric") for e in events], required=True),
        "variant": _names([e.get("variant") for e in events], required=False),
        "iter": pa.array(_iters([e.get("iter") for e in events]), type=pa.int64()),
        "value": pa.array(_values([e.get("value") for e in events]), type=pa.float64()),
        "model_event": _flags([e.get("model_event") for e in events]),
    }


def _logs(events: list[dict]) -> dict[str, pa.Array]:
    msgs = [e.get("msg") for e in events]
    _distinct_types(msgs, (str,))
    if max(map(len, msgs)) > MAX_MSG:
        raise _Undecided
    levels = [e.get("level") for e in events]
    try:
        spelled = {level: _level(level) for level in _distinct_strings(levels, none=True)}
    except _Reject as bad:
        raise _Undecided from bad
    return {
        "seq": pa.array(_seqs([e.get("seq") for e in events]), type=pa.uint64()),
        "level": _strings(levels if _same(spelled) else [spelled[level] for level in levels], set(spelled.values())),
        "msg": pa.array(msgs, type=pa.string()),
    }


def _system(events: list[dict]) -> dict[str, pa.Array]:
    devices = [e.get("device", "") for e in events]
    # the accelerator index as a string; an integer (not a bool) is written as one
    spelled = {d: str(d) if type(d) is int else d for d in _distinct(devices, (str, int))}
    if any(len(d) > 64 for d in spelled.values()):
        raise _Undecided
    if not _same(spelled):
        devices = [spelled[d] for d in devices]
    return {
        "metric": _names([e.get("metric") for e in events], required=True),
        "device": _strings(devices, set(spelled.values())),
        "value": pa.array(_values([e.get("value") for e in events]), type=pa.float64()),
    }


def _pick(values: list, at: list[int] | None) -> list:
    """The entries ``at`` of ``values`` (all of them for None)."""
    if at is None:
        return values
    return list(itemgetter(*at)(values)) if len(at) > 1 else [values[at[0]]]


def _same(spelled: dict) -> bool:
    """Whether every distinct value is stored as it was sent (the column needs no mapping)."""
    return all(sent == stored and type(sent) is type(stored) for sent, stored in spelled.items())


def _distinct_types(values: Any, allowed: tuple[type, ...]) -> set[type]:
    types = set(map(type, values))  # exact types: a bool is no int here, as in the per-line rules
    if not types.issubset(allowed):
        raise _Undecided
    return types


def _distinct(values: list, allowed: tuple[type, ...]) -> set:
    """The distinct values, once each is of an ``allowed`` type (so that no bool passes for an int)."""
    _distinct_types(values, allowed)
    return set(values)


def _distinct_strings(values: list, none: bool) -> set:
    """The distinct values, once each is a string (or None where ``none``).

    The types of the distinct values are enough here: a value of another type never equals a string or None, so
    some value of another type stands for it in the set (an unhashable one raises TypeError: undecided).
    """
    distinct = set(values)
    _distinct_types(distinct, (str, _NONE) if none else (str,))
    return distinct


def _names(values: list, required: bool) -> pa.Array:
    """A metric (required: non-empty) or variant (optional: missing or null is "") of at most MAX_NAME characters."""
    distinct = _distinct_strings(values, none=not required)
    if None in distinct:
        values = ["" if v is None else v for v in values]
        distinct = {"" if v is None else v for v in distinct}
    if not all((v or not required) and len(v) <= MAX_NAME for v in distinct):
        raise _Undecided
    return _strings(values, distinct)


def _strings(values: list, distinct: set[str]) -> pa.Array:
    """``values`` as Arrow strings; ``distinct`` holds every value of the list (and may hold more)."""
    if len(distinct) == 1:
        return pa.repeat(pa.scalar(next(iter(distinct)), type=pa.string()), len(values))
    return pa.array(values, type=pa.string())


def _timestamps(values: list, now_ms: int) -> np.ndarray:
    """Epoch milliseconds: a missing one is ``now_ms``, a float is truncated, all within the accepted range."""
    types = _distinct_types(values, (int, float, _NONE))
    if types != {int}:
        values = [now_ms if v is None else int(v) for v in values]  # int(NaN) raises ValueError: undecided
    ts = np.array(values, dtype=np.int64)  # OverflowError past int64: undecided
    if ts.min() < TS_MIN or ts.max() > now_ms + TS_AHEAD:
        raise _Undecided
    return ts


def _iters(values: list) -> np.ndarray:
    """Integers in [ITER_MIN, ITER_MAX]; a float is taken when it is whole."""
    if float in _distinct_types(values, (int, float)):
        if not all(v.is_integer() for v in values if type(v) is float):
            raise _Undecided
        values = [int(v) for v in values]
    iters = np.array(values, dtype=np.int64)
    if iters.min() < ITER_MIN or iters.max() > ITER_MAX:
        raise _Undecided
    return iters


def _values(values: list) -> np.ndarray:
    """Numbers as float64, and the strings "NaN", "Infinity", "-Infinity" (and their short spellings)."""
    if str in _distinct_types(values, (int, float, str)):
        values = [_SPECIAL[v] if type(v) is str else v for v in values]  # KeyError for any other string: undecided
    return np.array(values, dtype=np.float64)  # each int as float(int), like the per-line path


def _flags(values: list) -> pa.Array:
    """``model_event`` as 0 or 1: whether the value is true in Python's sense, as the per-line path has it."""
    if values.count(None) == len(values):
        return pa.repeat(pa.scalar(0, type=pa.uint8()), len(values))
    return pa.array(np.fromiter(map(bool, values), dtype=np.uint8, count=len(values)), type=pa.uint8())


def _seqs(values: list) -> np.ndarray:
    """Integers in [0, 2**64)."""
    _distinct_types(values, (int,))
    try:
        seqs = np.array(values, dtype=np.int64)
    except OverflowError:
        return np.array(values, dtype=np.uint64)  # raises OverflowError again for a negative one: undecided
    if seqs.min() < 0:
        raise _Undecided
    return seqs.astype(np.uint64)
