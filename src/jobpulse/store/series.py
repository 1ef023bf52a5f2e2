"""Query rows of bucketed series, ordered by their key and bucket, cut into one columnar series per key."""

from __future__ import annotations

import itertools
from typing import Any

import pyarrow as pa


def split_series(
    table: pa.Table, keys: tuple[str, ...], x_name: str, origin: int, width: int, values: tuple[str, ...]
) -> list[dict[str, Any]]:
    """Rows ordered by ``keys`` then bucket ``b`` into one series per key: the key's columns, ``x_name``
    the start of each bucket (``origin + b * width``) and a list per column of ``values``."""
    n = table.num_rows
    if n == 0:
        return []
    key_rows = list(zip(*(table.column(name).to_pylist() for name in keys), strict=True))
    cuts = [0] + [i for i in range(1, n) if key_rows[i] != key_rows[i - 1]] + [n]
    xs = (origin + table.column("b").to_numpy() * width).tolist()
    columns = {name: table.column(name).to_pylist() for name in values}
    return [
        {**dict(zip(keys, key_rows[lo], strict=True)), x_name: xs[lo:hi], **{k: c[lo:hi] for k, c in columns.items()}}
        for lo, hi in itertools.pairwise(cuts)
    ]
