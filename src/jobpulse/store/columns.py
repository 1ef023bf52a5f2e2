"""Arrow schemas of the tables written by jobpulse: the insert path builds columns, not rows."""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

_MS = pa.timestamp("ms", tz="UTC")

SCHEMAS: dict[str, pa.Schema] = {
    "jobs": pa.schema(
        [
            ("job", pa.string()),
            ("project", pa.string()),
            ("name", pa.string()),
            ("status", pa.string()),
            ("created", _MS),
            ("started", _MS),
            ("ended", _MS),
            ("updated", _MS),
            ("tags", pa.list_(pa.string())),
            ("config", pa.string()),
            ("instance_type", pa.string()),
            ("error_message", pa.string()),
            ("leader", pa.string()),
            ("locked", pa.uint8()),
            ("deleted", pa.uint8()),
            ("version", pa.uint64()),
        ]
    ),
    "job_writes": pa.schema([("job", pa.string()), ("version", pa.uint64()), ("state", pa.string())]),
    "workers": pa.schema(
        [
            ("job", pa.string()),
            ("worker", pa.string()),
            ("status", pa.string()),
            ("host", pa.string()),
            ("exit_code", pa.int32()),
            ("started", _MS),
            ("ended", _MS),
            ("updated", _MS),
            ("deleted", pa.uint8()),
            ("version", pa.uint64()),
            ("kind", pa.string()),
            ("node", pa.string()),
            ("rank", pa.int32()),
            ("local_rank", pa.int32()),
        ]
    ),
    "scalars": pa.schema(
        [
            ("job", pa.string()),
            ("metric", pa.string()),
            ("variant", pa.string()),
            ("iter", pa.int64()),
            ("ts", _MS),
            ("value", pa.float64()),
            ("worker", pa.string()),
            ("model_event", pa.uint8()),
        ]
    ),
    "events": pa.schema(
        [
            ("job", pa.string()),
            ("kind", pa.string()),
            ("metric", pa.string()),
            ("variant", pa.string()),
            ("iter", pa.int64()),
            ("key", pa.string()),
            ("ts", _MS),
            ("worker", pa.string()),
            ("url", pa.string()),
            ("payload", pa.string()),
            ("model_event", pa.uint8()),
        ]
    ),
    "logs": pa.schema(
        [
            ("job", pa.string()),
            ("ts", _MS),
            ("worker", pa.string()),
            ("seq", pa.uint64()),
            ("level", pa.string()),
            ("msg", pa.string()),
        ]
    ),
    "log_fields": pa.schema(
        [
            ("job", pa.string()),
            ("ts", _MS),
            ("worker", pa.string()),
            ("seq", pa.uint64()),
            ("metric", pa.string()),
            ("variant", pa.string()),
            ("iter", pa.int64()),
        ]
    ),
    "system": pa.schema(
        [
            ("job", pa.string()),
            ("worker", pa.string()),
            ("metric", pa.string()),
            ("device", pa.string()),
            ("ts", _MS),
            ("value", pa.float64()),
        ]
    ),
    "api_keys": pa.schema(
        [
            ("key_id", pa.string()),
            ("secret_hash", pa.string()),
            ("name", pa.string()),
            ("projects", pa.list_(pa.string())),
            ("role", pa.string()),
            ("created", _MS),
            ("revoked", _MS),
            ("version", pa.uint64()),
        ]
    ),
    "server_state": pa.schema([("name", pa.string()), ("value", pa.string()), ("version", pa.uint64())]),
}


def rows_to_arrow(table: str, rows: list[dict[str, Any]]) -> pa.Table:
    """A small insert (jobs, keys): rows to a table of ``table``'s schema."""
    return pa.Table.from_pylist(rows, schema=SCHEMAS[table])


def columns_to_arrow(table: str, columns: dict[str, Any], rows: int | None = None) -> pa.Table:
    """The hot path: whole columns (lists or numpy arrays) to a table of ``table``'s schema.

    A column given as a single value (a series' job, metric or worker) is repeated ``rows`` times
    in Arrow, without building a Python list of copies.
    """
    schema = SCHEMAS[table]
    arrays = []
    for f in schema:
        value = columns[f.name]
        if rows is not None and not isinstance(value, (list, np.ndarray, pa.Array)):
            arrays.append(pa.repeat(pa.scalar(value, type=f.type), rows))
        else:
            arrays.append(pa.array(value, type=f.type))
    return pa.Table.from_arrays(arrays, schema=schema)
