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


def row_keys(table: pa.Table, names: tuple[str, ...]) -> tuple[np.ndarray, list[tuple[Any, ...]]]:
    """A code per row naming its values of the columns ``names``, and the values each code names.

    A column that holds one value (a batch's job, mostly; a scalar's variant, often) is found as such and left
    out of the codes: JSON lines of 10 metrics, 100,000 points, 7.0 -> 2.4 ms. Rows that come in runs of one key
    are told apart by comparing neighbours, others by hashing every row."""
    same = {name: one_value(table.column(name)) for name in names}
    varying = [name for name in names if same[name] is None]
    if not varying:
        return np.zeros(table.num_rows, dtype=np.int64), [tuple(same[name] for name in names)]
    found = _key_runs(table, varying)
    if found is None:
        found = _hashed(table, varying)
    codes, keys = found
    return codes, [tuple(key[varying.index(n)] if same[n] is None else same[n] for n in names) for key in keys]


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


def _hashed(table: pa.Table, names: list[str]) -> tuple[np.ndarray, list[tuple[str, ...]]]:
    """A code per row naming its values of the columns ``names``, and the values each code names."""
    if len(names) == 1:  # the codes of one column's dictionary are already numbered by first row
        encoded = pc.dictionary_encode(table.column(names[0])).combine_chunks()
        codes = encoded.indices.to_numpy(zero_copy_only=False).astype(np.int64)
        return codes, [(value,) for value in encoded.dictionary.to_pylist()]
    codes = np.zeros(table.num_rows, dtype=np.int64)
    for name in names:
        encoded = pc.dictionary_encode(table.column(name)).combine_chunks()
        size = max(1, len(encoded.dictionary))
        if codes.size and int(codes.max()) >= np.iinfo(np.int64).max // size:
            codes = np.unique(codes, return_inverse=True)[1].astype(np.int64)  # renumber before it overflows
        codes = codes * size + encoded.indices.to_numpy(zero_copy_only=False).astype(np.int64)
    if codes.size and int(codes.max()) < 4 * codes.size:  # the usual batch: renumber by counting, no sort
        present = np.zeros(int(codes.max()) + 1, dtype=bool)
        present[codes] = True
        number = np.cumsum(present) - 1
        first_rows = np.empty(len(present), dtype=np.int64)
        first_rows[codes[::-1]] = np.arange(codes.size - 1, -1, -1)  # the last write for a code is its first row
        first_rows, codes = first_rows[present], number[codes]
    else:
        _, first_rows, codes = np.unique(codes, return_index=True, return_inverse=True)
    values = [table.column(name).take(pa.array(first_rows)).to_pylist() for name in names]
    return codes.reshape(-1), list(zip(*values, strict=True))


def _key_runs(table: pa.Table, names: list[str]) -> tuple[np.ndarray, list[tuple[str, ...]]] | None:
    """``_hashed`` for the usual batch, whose rows come in runs of one key (a columnar or Arrow body sends a
    series at a time): neighbours are compared instead of every row hashed. None when the rows change series
    too often for that to pay."""
    n = table.num_rows
    columns = [table.column(name) for name in names]
    most = max(64, n // 256)
    if len(run_starts([column.slice(0, 4096) for column in columns])) > most:
        return None  # its first rows change series too often already (JSON lines, step by step)
    starts = run_starts(columns)
    if len(starts) > most:
        return None
    at = pa.array(starts)
    keys = list(zip(*(column.take(at).to_pylist() for column in columns), strict=True))
    index: dict[tuple[str, ...], int] = {}
    run_codes = np.fromiter((index.setdefault(key, len(index)) for key in keys), dtype=np.int64, count=len(keys))
    return np.repeat(run_codes, np.diff(np.append(starts, n))), list(index)
