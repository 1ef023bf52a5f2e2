"""What the parts of one small batch cost the embedded engine: the floor under a scalar batch's acknowledgement.

A batch of scalar points is written to three tables (the points, their chart rollup and their series' summary), so
the engine makes three parts for it. This prints, without jobpulse around the engine (one chdb data directory, fresh
tables shaped like the points table, 100 rows a part: a ClearML ``add_batch`` of 100 scalar events):

- ``one part``: one insert into one table;
- ``three parts, one after another`` (one connection) and ``three parts, side by side`` (three connections on three
  threads), with
  the engine's background merges of the parts running, as in a server, and again with them stopped
  (``SYSTEM STOP MERGES``; the tables are new for each line, so parts pile up only within it);
- ``three parts from one insert``: one insert into a ``Null`` table whose three materialized views write the three
  tables (the engine's own fan-out: one statement instead of three).

Each line is --repeats batches after 20 untimed ones, p50 and p99 in milliseconds, with the machine it ran on.

    .venv/bin/python bench/bench_engine_parts.py
    .venv/bin/python bench/bench_engine_parts.py --repeats 500
"""

from __future__ import annotations

import argparse
import tempfile
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import pyarrow as pa
from machine import describe
from timing import timed

ROWS = 100
TABLES = ("points_a", "points_b", "points_c")
COLUMNS = "job, metric, variant, iter, value, inserted"
SCHEMA = "job String, metric String, variant String, iter Int64, value Float64, inserted DateTime64(6)"
ENGINE = "ENGINE = ReplacingMergeTree(inserted) ORDER BY (job, metric, variant, iter)"
AS_GIVEN = " SETTINGS optimize_on_insert = 0, max_threads = 1"  # the settings the writer inserts points with


class Batches:
    """Arrow IPC streams of successive 100-point batches: 10 metrics x 10 variants, one new iteration each."""

    def __init__(self, kinds: int = 1) -> None:
        self.step = 0
        self.kinds = kinds

    def next(self) -> bytes:
        self.step += 1
        n = ROWS * self.kinds
        columns: dict[str, Any] = {
            "job": ["bench-job"] * n,
            "metric": [f"metric_{(k % ROWS) // 10}" for k in range(n)],
            "variant": [f"variant_{k % 10}" for k in range(n)],
            "iter": pa.array(np.full(n, self.step), pa.int64()),
            "value": np.random.default_rng(self.step).random(n),
            "inserted": pa.array(np.full(n, 1_700_000_000_000_000 + self.step)).cast(pa.timestamp("us")),
        }
        if self.kinds > 1:
            columns = {"kind": pa.array(np.repeat(np.arange(self.kinds), ROWS).astype(np.uint8)), **columns}
        table = pa.table(columns)
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, table.schema) as writer:
            writer.write_table(table)
        return sink.getvalue().to_pybytes()


def insert(connection: Any, table: str, columns: str, stream: bytes) -> None:
    with connection.send_insert(f"INSERT INTO {table} ({columns}){AS_GIVEN}", "ArrowStream") as pending:
        pending.append(stream)
        pending.finish()


class Engine:
    """A chdb data directory with a connection per table, whose tables are made anew for each measured line."""

    def __init__(self, path: str) -> None:
        import chdb

        self.connections = [chdb.connect(path) for _ in TABLES]
        self.round = 0
        self.pool = ThreadPoolExecutor(max_workers=len(TABLES))

    def fresh(self, merges: bool = True, fanned_out: bool = False) -> list[str]:
        """New tables for a line (a database of their own, the last line's dropped); answers their names."""
        first = self.connections[0]
        if self.round:  # the last line's tables go, and their merges with them
            first.query(f"DROP DATABASE line_{self.round} SYNC")
        self.round += 1
        db = f"line_{self.round}"
        first.query(f"CREATE DATABASE {db}")
        tables = [f"{db}.{name}" for name in TABLES]
        for table in tables:
            first.query(f"CREATE TABLE {table} ({SCHEMA}) {ENGINE}")
        if fanned_out:
            first.query(f"CREATE TABLE {db}.batch (kind UInt8, {SCHEMA}) ENGINE = Null")
            for kind, table in enumerate(tables):
                first.query(
                    f"CREATE MATERIALIZED VIEW {table}_view TO {table} AS "
                    f"SELECT {COLUMNS} FROM {db}.batch WHERE kind = {kind}"
                )
        if not merges:
            for table in tables:
                first.query(f"SYSTEM STOP MERGES {table}")
        return tables

    def close(self) -> None:
        self.pool.shutdown()
        for connection in self.connections:
            connection.close()

    def one_part(self, tables: list[str], stream: bytes) -> None:
        insert(self.connections[0], tables[0], COLUMNS, stream)

    def in_turn(self, tables: list[str], stream: bytes) -> None:
        for table in tables:
            insert(self.connections[0], table, COLUMNS, stream)

    def side_by_side(self, tables: list[str], stream: bytes) -> None:
        pending = [
            self.pool.submit(insert, connection, table, COLUMNS, stream)
            for connection, table in zip(self.connections, tables, strict=True)
        ]
        for future in pending:
            future.result()

    def fanned_out(self, tables: list[str], stream: bytes) -> None:
        insert(self.connections[0], tables[0].split(".")[0] + ".batch", f"kind, {COLUMNS}", stream)


# label, how a batch is written, whether the engine merges, whether its tables are fed by views
LINES: list[tuple[str, Callable[[Engine, list[str], bytes], None], bool, bool]] = [
    ("one part", Engine.one_part, True, False),
    ("three parts, one after another", Engine.in_turn, True, False),
    ("three parts, side by side", Engine.side_by_side, True, False),
    ("three parts, one after another, merges stopped", Engine.in_turn, False, False),
    ("three parts, side by side, merges stopped", Engine.side_by_side, False, False),
    ("three parts from one insert (views)", Engine.fanned_out, True, True),
]


def _batch_by(engine: Engine, write: Callable[..., None], tables: list[str], batches: Batches) -> Callable[[], None]:
    """One timed call of a line: the next batch's stream built, then written."""
    return lambda: write(engine, tables, batches.next())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=300, help="timed batches per line")
    args = parser.parse_args()
    print(f"machine: {describe()}")
    print(f"engine:  embedded chdb, a fresh data directory; {ROWS} rows a part; p50 / p99 in ms per batch")
    with tempfile.TemporaryDirectory() as path:
        engine = Engine(path)
        for label, write, merges, fanned_out in LINES:
            tables, batches = engine.fresh(merges, fanned_out), Batches(kinds=len(TABLES) if fanned_out else 1)
            ms = timed(_batch_by(engine, write, tables, batches), args.repeats, 20)
            print(f"  {label:<50} p50 {np.percentile(ms, 50):7.3f}   p99 {np.percentile(ms, 99):7.3f}")
        engine.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
