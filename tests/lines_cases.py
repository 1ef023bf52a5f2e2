"""What the tests of the JSON-lines paths share: events, the comparison of two batches, random events."""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

from helpers import NOW_MS
from jobpulse.ingest.batch import Batch

DEFAULTS: dict[str, str | None] = {"project": "proj", "job": "j1", "worker": None}
TS = NOW_MS - 60_000


def scalar(**fields: Any) -> dict[str, Any]:
    return {"kind": "scalar", "metric": "loss", "iter": 1, "value": 0.5, "ts": TS, **fields}


def log(**fields: Any) -> dict[str, Any]:
    return {"kind": "log", "seq": 1, "msg": "hello", "ts": TS, **fields}


def system(**fields: Any) -> dict[str, Any]:
    return {"kind": "system", "metric": "gpu_util", "device": "0", "value": 97.0, "ts": TS, **fields}


def state(batch: Batch) -> tuple:
    """Everything but the rows: in order, since the answer and the job registration follow that order."""
    return (
        batch.accepted,
        list(batch.errors.items()),
        batch.examples,
        list(batch.jobs.items()),
        batch.workers,
        list(batch.first_ts.items()),
    )


def assert_same_tables(got: dict[str, pa.Table], want: dict[str, pa.Table]) -> None:
    assert list(got) == list(want)
    for name in want:
        assert got[name].schema == want[name].schema, name
        for column in want[name].column_names:
            a, b = got[name][column].combine_chunks(), want[name][column].combine_chunks()
            if pa.types.is_floating(b.type):  # bit for bit, so that NaN equals NaN and -0.0 differs from 0.0
                assert np.array_equal(a.to_numpy().view(np.uint64), b.to_numpy().view(np.uint64)), (name, column)
            else:
                assert a.equals(b), (name, column, a.to_pylist()[:5], b.to_pylist()[:5])


def assert_same(got: Batch, want: Batch) -> None:
    assert state(got) == state(want)
    assert_same_tables(got.tables(), want.tables())


# -- random events ---------------------------------------------------------------------------------

_MISSING = object()
# per field: values the rules accept, then values they refuse (_MISSING: the field is left out)
FIELDS: dict[str, tuple[list, list]] = {
    "job": ([_MISSING, "j1", "j2", "a.b:c-d"], ["-x", None, 1, ""]),
    "project": ([_MISSING, "p1", "p2", None], ["a b", 3]),
    "worker": ([_MISSING, "", None, "w1", "w/2"], ["w 1", False]),
    "ts": ([_MISSING, None, TS, TS - 1, TS + 0.5, float(TS)], [True, 5, "x", NOW_MS * 2]),
    "metric": (["m", "ünï", "m" * 255], ["", None, 5, "m" * 256]),
    "variant": ([_MISSING, None, "", "v", "训练"], [1, ["v"]]),
    "iter": ([0, 5, 2.0, 2**53, -(2**31)], [2.5, True, 2**53 + 1, -(2**31) - 1, None]),
    "value": ([1, 0.5, -0.0, "NaN", "-inf", 2**64 - 1, -(2**63)], ["high", True, None, [1]]),
    "model_event": ([_MISSING, True, 0, "x", None, {}], []),
    "seq": ([0, 7, 2**63, 2**64 - 1], [-1, 1.0, True, None]),
    "msg": (["hi", "", "✓ line"], [None, 3]),
    "level": ([_MISSING, None, "WARN", "info", "Error"], ["loud", 1]),
    "device": ([_MISSING, "0", 1, "", "d" * 64], [None, 0.0, True, "d" * 65]),
}
KIND_FIELDS = {
    "scalar": ["job", "project", "worker", "ts", "metric", "variant", "iter", "value", "model_event"],
    "log": ["job", "project", "worker", "ts", "seq", "msg", "level"],
    "system": ["job", "project", "worker", "ts", "metric", "device", "value"],
}


def random_event(rng: Any, dirty: bool) -> dict[str, Any]:
    kind = rng.choice(["scalar", "scalar", "log", "system"])
    event: dict[str, Any] = {"kind": kind} if rng.random() < 0.9 else {"type": kind}
    spoilt = rng.choice(KIND_FIELDS[kind]) if dirty else None
    for name in KIND_FIELDS[kind]:
        good, bad = FIELDS[name]
        value = rng.choice(bad if name == spoilt and bad else good)
        if value is not _MISSING:
            event[name] = value
    return event
