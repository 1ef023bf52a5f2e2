"""Rows ordered by a key, cut into runs of one key: bucketed query rows become one columnar series per key."""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc


def run_starts(columns: list[pa.ChunkedArray]) -> np.ndarray:
    """The rows at which a run of one key begins, in rows ordered by that key (``columns``: the key's columns,
    none null): neighbours are compared, nothing is hashed."""
    n = len(columns[0])
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    changed = np.zeros(n - 1, dtype=bool)
    for column in columns:
        changed |= pc.not_equal(column.slice(1), column.slice(0, n - 1)).to_numpy()
    return np.flatnonzero(np.concatenate(([True], changed)))


def series_runs(columns: list[pa.ChunkedArray], ts_ms: np.ndarray) -> np.ndarray | None:
    """The rows at which each key's run begins, where the rows hold every key (``columns``) in one run of
    increasing times ``ts_ms``, as rows sent series by series do; None for rows in any other order."""
    starts = run_starts(columns)
    if len(starts) > 1:
        keys = zip(*(column.take(pa.array(starts)).to_pylist() for column in columns), strict=True)
        if len(set(keys)) < len(starts):
            return None
    later = ts_ms[1:] > ts_ms[:-1]
    later[starts[1:] - 1] = True  # a run's first time need not follow the run before it
    return starts if bool(np.all(later)) else None


def one_value(column: pa.Array | pa.ChunkedArray) -> str | None:
    """The text of every row of a string column that holds one value and no null; None for any other column.

    The rows are compared as the column's buffers (every value as long as the first, the bytes the first
    repeated): about a tenth of the time of hashing them."""
    chunks = [c for c in (column.chunks if isinstance(column, pa.ChunkedArray) else [column]) if len(c)]
    if not chunks or column.null_count or not all(_is_text(chunk.type) for chunk in chunks):
        return None
    first = chunks[0][0].as_py()
    encoded = first.encode()
    for chunk in chunks:
        _, offsets_buffer, data = chunk.buffers()
        width = np.int64 if pa.types.is_large_string(chunk.type) else np.int32
        offsets = np.frombuffer(offsets_buffer, dtype=width)[chunk.offset : chunk.offset + len(chunk) + 1]
        if not np.all(np.diff(offsets) == len(encoded)):
            return None
        text = b"" if data is None else memoryview(data).cast("B")[int(offsets[0]) : int(offsets[-1])]
        if text != encoded * len(chunk):
            return None
    return first


def _is_text(kind: pa.DataType) -> bool:
    return pa.types.is_string(kind) or pa.types.is_large_string(kind)


def split_series(
    table: pa.Table, keys: tuple[str, ...], x_name: str, origin: int, width: int, values: tuple[str, ...]
) -> list[dict[str, Any]]:
    """Rows ordered by ``keys`` then bucket ``b`` into one series per key: the key's columns, ``x_name``
    the start of each bucket (``origin + b * width``) and a list per column of ``values``."""
    n = table.num_rows
    if n == 0:
        return []
    starts = run_starts([table.column(name) for name in keys])
    at = pa.array(starts)
    key_rows = zip(*(table.column(name).take(at).to_pylist() for name in keys), strict=True)
    cuts = itertools.pairwise(np.append(starts, n).tolist())
    xs = (origin + table.column("b").to_numpy() * width).tolist()
    columns = {name: table.column(name).to_pylist() for name in values}
    return [
        {**dict(zip(keys, key, strict=True)), x_name: xs[lo:hi], **{k: c[lo:hi] for k, c in columns.items()}}
        for key, (lo, hi) in zip(key_rows, cuts, strict=True)
    ]
