"""The embedded engine runs statements on a pool of connections: no caller waits for another's statement."""

from __future__ import annotations

import threading
import time

import pytest

from jobpulse.errors import StoreUnavailable
from jobpulse.store.engine import EmbeddedEngine

# a statement that keeps its connection busy for about a second
SLOW = "SELECT sleepEachRow(0.25) AS s FROM numbers(4)"


def _in_thread(engine: EmbeddedEngine, sql: str, finished: list[str], name: str) -> threading.Thread:
    def run() -> None:
        engine.query(sql)
        finished.append(name)

    thread = threading.Thread(target=run)
    thread.start()
    return thread


def test_a_query_is_answered_while_another_statement_runs(embedded_engine: EmbeddedEngine) -> None:
    finished: list[str] = []
    slow = _in_thread(embedded_engine, SLOW, finished, "slow")
    time.sleep(0.1)  # the slow statement holds its connection
    started = time.monotonic()
    assert embedded_engine.query("SELECT 41 + 1 AS n").column("n")[0].as_py() == 42
    waited = time.monotonic() - started
    slow.join()
    assert finished == ["slow"]
    assert waited < 0.5, f"the quick query waited {waited:.2f} s for the slow one"


def test_callers_beyond_the_pool_wait_for_a_connection(
    embedded_engine: EmbeddedEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(embedded_engine, "max_connections", len(embedded_engine._opened))
    finished: list[str] = []
    holders = [_in_thread(embedded_engine, SLOW, finished, f"slow-{i}") for i in range(len(embedded_engine._opened))]
    time.sleep(0.1)
    started = time.monotonic()
    embedded_engine.query("SELECT 1 AS n")
    waited = time.monotonic() - started
    for holder in holders:
        holder.join()
    assert len(embedded_engine._opened) <= embedded_engine.max_connections
    assert waited > 0.3, "a caller beyond the pool's size ran without waiting for a connection"


def test_a_closed_engine_refuses_statements(engine_dir) -> None:  # noqa: ANN001
    engine = EmbeddedEngine(str(engine_dir / "clickhouse"))  # a second engine on the session's directory
    try:
        engine.query("SELECT 1 AS n")
    finally:
        engine.close()
        EmbeddedEngine._open_paths.add(str(engine_dir / "clickhouse"))  # still open by the session's engine
    with pytest.raises(StoreUnavailable, match="closed"):
        engine.query("SELECT 1 AS n")
