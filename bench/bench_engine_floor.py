"""The floor under every write's latency: what the embedded engine and this machine take for the smallest statements.

A small request's time is mostly the engine's statements, so this prints what the engine itself takes, without
jobpulse around it: ``SELECT 1``, and an insert of 100 rows (a ClearML ``add_batch`` of 100 scalar events is 100
points) into a MergeTree table and into a ``Null`` table (the same statement, which keeps no part: what a part
adds to it), through one chdb connection to a fresh data directory, each timed --repeats times
back to back and again after a pause before every statement (--pause-ms; the ClearML SDK's reporter waits between
its batches; and a longer one, --long-pause-s, as between a person's clicks). Beside them, the same pauses before
a hand-off between two Python threads (one puts an item on a queue, the other answers on another), which measures
how long this machine takes to wake a sleeping thread (a statement of the engine hands work to its own threads
several times), and before a sum of 2 M floats with numpy (16 MB read from memory, no thread, no engine): what the
machine itself loses after an idle spell.

    .venv/bin/python bench/bench_engine_floor.py
    .venv/bin/python bench/bench_engine_floor.py --repeats 400 --pause-ms 100 --long-pause-s 2
"""

from __future__ import annotations

import argparse
import queue
import tempfile
import threading
from collections.abc import Callable

import numpy as np
from machine import describe
from timing import timed


def thread_handoff() -> Callable[[], None]:
    """A call that hands an item to another thread and waits for its answer."""
    asked: queue.Queue = queue.Queue()
    answered: queue.Queue = queue.Queue()

    def answer() -> None:
        while True:
            answered.put(asked.get())

    threading.Thread(target=answer, daemon=True).start()

    def call() -> None:
        asked.put(1)
        answered.get()

    return call


def engine_calls(path: str) -> dict[str, Callable[[], None]]:
    """``SELECT 1`` and a 100-row insert into a MergeTree and into a ``Null`` table through one chdb connection."""
    import chdb

    connection = chdb.connect(path)
    connection.query(
        "CREATE TABLE points (series String, iter Int64, value Float64) ENGINE = MergeTree ORDER BY (series, iter)"
    )
    connection.query("CREATE TABLE nowhere (series String, iter Int64, value Float64) ENGINE = Null")
    rows = ", ".join(f"('metric_{k // 10}/variant_{k % 10}', 0, {k / 100})" for k in range(100))
    return {
        "SELECT 1": lambda: connection.query("SELECT 1", "Null"),
        "INSERT of 100 rows": lambda: connection.query(f"INSERT INTO points VALUES {rows}", "Null"),
        "the same, Null table": lambda: connection.query(f"INSERT INTO nowhere VALUES {rows}", "Null"),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=200, help="timed calls per line")
    parser.add_argument("--pause-ms", type=float, default=100.0, help="the pause before each call of the paused lines")
    parser.add_argument("--long-pause-s", type=float, default=2.0, help="the long pause, before --long-repeats calls")
    parser.add_argument("--long-repeats", type=int, default=10, help="timed calls after the long pause")
    args = parser.parse_args()
    print(f"machine: {describe()}")
    print("engine:  embedded chdb, one connection, a fresh data directory; p50 / p99 in ms")
    with tempfile.TemporaryDirectory() as path:
        floats = np.random.default_rng(0).random(2_000_000)
        calls = {"thread hand-off": thread_handoff(), "numpy sum of 2 M": floats.sum, **engine_calls(path)}
        loads = [
            ("back to back", args.repeats, 0.0),
            (f"{args.pause_ms:.0f} ms pause before each", args.repeats, args.pause_ms / 1000),
            (f"{args.long_pause_s:g} s pause before each", args.long_repeats, args.long_pause_s),
        ]
        for label, call in calls.items():
            for when, repeats, pause in loads:
                ms = timed(call, repeats, 5, pause)
                print(f"  {label:<20} {when:<26} p50 {np.percentile(ms, 50):7.3f}   p99 {np.percentile(ms, 99):7.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
