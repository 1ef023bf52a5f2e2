"""The ClickHouse stand-in answers like a server in time too: no added wait per statement, clients served at once.

(Over ``JOBPULSE_TEST_CLICKHOUSE_URL`` these run against that server, which holds to them as well.)"""

from __future__ import annotations

import statistics
import threading
import time

from jobpulse.store.engine import HttpEngine

SLOW = "SELECT sleepEachRow(0.25) AS s FROM numbers(4)"  # about a second


def test_a_statement_round_trip_waits_for_no_acknowledgement(clickhouse_url: str) -> None:
    engine = HttpEngine(clickhouse_url)
    try:
        engine.query("SELECT 1 AS n")
        times = []
        for _ in range(15):
            started = time.perf_counter()
            engine.query("SELECT 1 AS n")
            times.append(time.perf_counter() - started)
    finally:
        engine.close()
    # a reply whose body waited for the client's delayed acknowledgement of its headers took 40 ms or more
    assert statistics.median(times) < 0.030, f"median round trip {statistics.median(times) * 1000:.1f} ms"


def test_a_quick_statement_is_answered_while_another_client_runs_a_slow_one(clickhouse_url: str) -> None:
    slow, quick = HttpEngine(clickhouse_url), HttpEngine(clickhouse_url)
    try:
        thread = threading.Thread(target=slow.query, args=(SLOW,))
        thread.start()
        time.sleep(0.1)
        started = time.perf_counter()
        assert quick.query("SELECT 41 + 1 AS n").column("n")[0].as_py() == 42
        waited = time.perf_counter() - started
        thread.join()
    finally:
        slow.close()
        quick.close()
    assert waited < 0.5, f"the quick statement waited {waited:.2f} s for the other client's"
