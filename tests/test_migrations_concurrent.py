"""Schema migrations run once however many servers start at once, and go on where an interrupted one stopped.

Several migrators start on a database at an old schema: three processes over the HTTP transport (the session's
ClickHouse stand-in, or JOBPULSE_TEST_CLICKHOUSE_URL), and three threads on the embedded engine. Each step is
applied once, the others wait, and no row is lost or counted twice. A rebuild interrupted at any point is finished
by the next migrator.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import pyarrow as pa
import pytest

from helpers import fresh_database
from jobpulse.store import schema
from jobpulse.store.engine import EmbeddedEngine, Engine, HttpEngine
from jobpulse.store.migration_records import Books, Lease
from jobpulse.store.migrations import apply_steps
from jobpulse.store.statements import is_idempotent

SAMPLES = 3000
POINTS = 5000
T0 = 1_700_000_000_000 - 1_700_000_000_000 % 3_600_000

# A migrator in a process of its own: waits for the go file, migrates, prints the version it found.
MIGRATOR = """
import sys, time
from pathlib import Path
from jobpulse.store.engine import HttpEngine
from jobpulse.store.schema import migrate
url, cluster, db, ready, go = sys.argv[1:6]
engine = HttpEngine(url, cluster=cluster)
Path(ready).touch()
while not Path(go).exists():
    time.sleep(0.01)
print(migrate(engine, db, cluster))
engine.close()
"""


def at_step_3(engine: Engine, db: str) -> None:
    """``db`` created by the first three schema steps, with samples and points written as they were then (the
    views of that schema build the per-minute rollup)."""
    assert apply_steps(engine, db, schema.MIGRATIONS[:3], cluster=getattr(engine, "cluster", "")) == 0
    engine.command(
        f"INSERT INTO {db}.system (job, worker, metric, device, ts, value) SELECT 'job-1', 'worker-0', 'gpu_util', "
        f"toString(number % 2), fromUnixTimestamp64Milli(toInt64({T0} + intDiv(number, 2) * 5000)), number % 100 "
        f"FROM numbers({SAMPLES})"
    )
    engine.command(
        f"INSERT INTO {db}.scalars (job, metric, variant, iter, ts, value) SELECT 'job-1', 'loss', 'train', number, "
        f"fromUnixTimestamp64Milli(toInt64({T0} + number * 100)), number / 7 FROM numbers({POINTS})"
    )


def one_value(engine: Engine, sql: str) -> Any:
    return engine.query(sql).column(0)[0].as_py()


def assert_migrated_once(engine: Engine, db: str) -> None:
    """Every step recorded once, every statement done once, and the rows of the old schema all there, once."""
    versions = engine.query(f"SELECT version FROM {db}.schema_version ORDER BY version").column(0).to_pylist()
    assert versions == list(range(1, len(schema.MIGRATIONS) + 1))
    repeated = one_value(
        engine,
        f"SELECT count() FROM (SELECT version, statement FROM {db}.schema_progress "
        "GROUP BY version, statement HAVING count() > 1)",
    )
    assert repeated == 0
    done = one_value(engine, f"SELECT count() FROM {db}.schema_progress WHERE version > 3")
    assert done == sum(not is_idempotent(text.format(db=db)) for step in schema.MIGRATIONS[3:] for text in step)
    assert one_value(engine, f"SELECT sum(count) FROM {db}.system_1m") == SAMPLES
    assert one_value(engine, f"SELECT sum(count) FROM {db}.system_1h") == SAMPLES
    assert one_value(engine, f"SELECT count() FROM {db}.system") == SAMPLES
    assert one_value(engine, f"SELECT count() FROM {db}.scalars FINAL") == POINTS
    assert one_value(engine, f"SELECT sum(points) FROM {db}.scalars_latest") == POINTS


@pytest.fixture
def http_engine(clickhouse_url: str) -> Any:
    engine = HttpEngine(clickhouse_url, cluster=os.environ.get("JOBPULSE_TEST_CLICKHOUSE_CLUSTER", ""))
    yield engine
    engine.close()


@pytest.mark.e2e
def test_three_processes_started_at_once_on_an_old_schema_migrate_it_once(
    http_engine: HttpEngine, clickhouse_url: str, tmp_path: Path
) -> None:
    db = fresh_database()
    at_step_3(http_engine, db)
    url = urlunsplit(urlsplit(clickhouse_url)._replace(path=f"/{db}"))
    go = tmp_path / "go"
    processes = [
        subprocess.Popen(
            [sys.executable, "-c", MIGRATOR, url, http_engine.cluster, db, str(tmp_path / f"ready-{n}"), str(go)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for n in range(3)
    ]
    try:
        deadline = time.monotonic() + 120
        while not all((tmp_path / f"ready-{n}").exists() for n in range(3)) and time.monotonic() < deadline:
            time.sleep(0.05)
        go.touch()
        outputs = [process.communicate(timeout=240) for process in processes]
    finally:
        for process in processes:
            if process.poll() is None:
                process.kill()
                process.wait()
    for process, (out, err) in zip(processes, outputs, strict=True):
        assert process.returncode == 0, err.decode()
        assert out.decode().split() == ["3"]  # each found the old schema and came back once it was migrated
    assert_migrated_once(http_engine, db)
    cluster = f" ON CLUSTER {http_engine.cluster} SYNC" if http_engine.cluster else ""
    http_engine.command(f"DROP DATABASE IF EXISTS {db}{cluster}")


def test_three_threads_on_the_embedded_engine_migrate_an_old_schema_once(embedded_engine: EmbeddedEngine) -> None:
    db = fresh_database()
    at_step_3(embedded_engine, db)
    found: list[int] = []
    errors: list[BaseException] = []
    start = threading.Barrier(3)

    def migrator() -> None:
        start.wait()
        try:
            found.append(schema.migrate(embedded_engine, db))
        except BaseException as exc:  # reported below, by the test's own thread
            errors.append(exc)

    threads = [threading.Thread(target=migrator) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(240)
    assert not errors, errors
    assert found == [3, 3, 3]
    assert_migrated_once(embedded_engine, db)


def test_a_lease_its_holder_stopped_renewing_is_taken_over_when_it_expires(embedded_engine: EmbeddedEngine) -> None:
    db = fresh_database()
    apply_steps(embedded_engine, db, [])
    embedded_engine.command(
        f"INSERT INTO {db}.schema_lease SELECT 1, 'crashed', now64(3) + toIntervalMillisecond(1500), 0"
    )
    started = time.monotonic()
    assert apply_steps(embedded_engine, db, schema.MIGRATIONS[:1], poll_seconds=0.05) == 0
    assert time.monotonic() - started >= 1.0
    assert one_value(embedded_engine, f"SELECT max(lease) FROM {db}.schema_lease") == 2
    assert one_value(embedded_engine, f"SELECT max(version) FROM {db}.schema_version") == 1


class Crashing:
    """An engine that stops, as a crashed migrator would, at the first statement containing ``at``: before it,
    after it, or (a RENAME) after its first pair."""

    def __init__(self, engine: Engine, at: str, when: str) -> None:
        self._engine, self._at, self._when = engine, at, when
        self.crashed = False

    def __getattr__(self, name: str) -> Any:
        return getattr(self._engine, name)

    def query(self, sql: str, params: dict[str, Any] | None = None) -> pa.Table:
        return self._engine.query(sql, params)

    def command(self, sql: str, params: dict[str, Any] | None = None) -> None:
        if self.crashed or self._at not in sql:
            self._engine.command(sql, params)
            return
        self.crashed = True
        if self._when == "after":
            self._engine.command(sql, params)
        elif self._when == "first pair":
            self._engine.command(sql.split(",")[0], params)
        raise RuntimeError(f"stopped {self._when} {self._at}")


REBUILD_STOPS = [
    ("DROP VIEW IF EXISTS {db}.system_1m_mv", "after"),
    ("CREATE TABLE {db}.system_1m_v4", "after"),
    ("INSERT INTO {db}.system_1m_v4", "after"),
    ("RENAME TABLE {db}.system_1m TO", "first pair"),
    ("RENAME TABLE {db}.system_1m TO", "after"),
    ("DROP TABLE {db}.system_1m_v3", "before"),
    ("DROP TABLE {db}.system_1m_v3", "after"),
    ("INSERT INTO {db}.system_1h", "after"),
]


@pytest.mark.parametrize(("at", "when"), REBUILD_STOPS)
def test_an_interrupted_rebuild_is_finished_by_the_next_migrator(
    embedded_engine: EmbeddedEngine, at: str, when: str
) -> None:
    db = fresh_database()
    at_step_3(embedded_engine, db)
    crashing = Crashing(embedded_engine, at.format(db=db), when)
    with pytest.raises(Exception, match="stopped"):
        apply_steps(crashing, db, schema.MIGRATIONS[:4])
    assert crashing.crashed
    assert apply_steps(embedded_engine, db, schema.MIGRATIONS[:4]) == 3
    versions = embedded_engine.query(f"SELECT version FROM {db}.schema_version ORDER BY version").column(0)
    assert versions.to_pylist() == [1, 2, 3, 4]
    assert one_value(embedded_engine, f"SELECT sum(count) FROM {db}.system_1m") == SAMPLES
    assert one_value(embedded_engine, f"SELECT sum(count) FROM {db}.system_1h") == SAMPLES
    leftovers = one_value(
        embedded_engine,
        f"SELECT count() FROM system.tables WHERE database = '{db}' AND name IN ('system_1m_v3', 'system_1m_v4')",
    )
    assert leftovers == 0
    embedded_engine.command(
        f"INSERT INTO {db}.system (job, worker, metric, device, ts, value) "
        f"VALUES ('job-2', 'worker-0', 'gpu_util', '0', fromUnixTimestamp64Milli(toInt64({T0})), 1)"
    )
    assert one_value(embedded_engine, f"SELECT sum(count) FROM {db}.system_1m WHERE job = 'job-2'") == 1


@pytest.mark.parametrize("at", ["INSERT INTO {db}.scalars_rollup ", "RENAME TABLE {db}.scalars_latest TO"])
def test_an_interrupted_first_creation_starts_again(embedded_engine: EmbeddedEngine, at: str) -> None:
    db = fresh_database()
    crashing = Crashing(embedded_engine, at.format(db=db), "after")
    with pytest.raises(Exception, match="stopped"):
        apply_steps(crashing, db, schema.MIGRATIONS)
    assert one_value(embedded_engine, f"SELECT count() FROM {db}.schema_version") == 0
    assert apply_steps(embedded_engine, db, schema.MIGRATIONS) == 0
    versions = embedded_engine.query(f"SELECT version FROM {db}.schema_version ORDER BY version").column(0)
    assert versions.to_pylist() == list(range(1, len(schema.MIGRATIONS) + 1))
    fresh = fresh_database()
    apply_steps(embedded_engine, fresh, schema.MIGRATIONS)
    assert tables(embedded_engine, db) == tables(embedded_engine, fresh)


def tables(engine: Engine, db: str) -> list[tuple[str, str]]:
    """The tables of ``db``: name and columns."""
    rows = engine.query(
        "SELECT table, groupArray((name, type)) AS columns FROM (SELECT table, name, type FROM system.columns "
        f"WHERE database = '{db}' ORDER BY table, position) GROUP BY table ORDER BY table"
    ).to_pylist()
    return [(row["table"], str(row["columns"])) for row in rows]


def test_one_server_runs_every_step_as_written(embedded_engine: EmbeddedEngine) -> None:
    db = fresh_database()
    ran: list[str] = []
    recording = Recording(embedded_engine, ran.append)
    apply_steps(recording, db, schema.MIGRATIONS)
    written = [text.format(db=db) for step in schema.MIGRATIONS for text in step]
    assert [sql for sql in ran if sql in written] == written
    assert all(sql in written or _is_bookkeeping(sql, db) for sql in ran)


class Recording:
    """An engine that tells ``seen`` each command it runs."""

    def __init__(self, engine: Engine, seen: Callable[[str], None]) -> None:
        self._engine, self._seen = engine, seen

    def __getattr__(self, name: str) -> Any:
        return getattr(self._engine, name)

    def query(self, sql: str, params: dict[str, Any] | None = None) -> pa.Table:
        return self._engine.query(sql, params)

    def command(self, sql: str, params: dict[str, Any] | None = None) -> None:
        self._seen(sql)
        self._engine.command(sql, params)


def _is_bookkeeping(sql: str, db: str) -> bool:
    return any(f"{db}.{table}" in sql for table in ("schema_version", "schema_progress", "schema_lease")) or (
        sql == f"CREATE DATABASE IF NOT EXISTS {db}"
    )


def test_a_lease_that_expired_unclaimed_stays_its_holders(embedded_engine: EmbeddedEngine) -> None:
    """A statement longer than the lease (renewals wait for it on the embedded engine) does not stop a migration
    that no other migrator took over: the holder renews the lease at once."""
    db = fresh_database()
    apply_steps(embedded_engine, db, [])
    lease = Lease(embedded_engine, Books(embedded_engine, db, ""), seconds=0.2)
    assert lease.acquire()
    time.sleep(0.4)
    assert lease.latest()[2] <= 0
    lease.check()
    assert lease.latest()[:2] == (1, lease.holder) and lease.latest()[2] > 0


def test_a_migrator_whose_lease_was_taken_over_stops(embedded_engine: EmbeddedEngine) -> None:
    """A migrator that stalled past its lease, and whose lease another migrator then claimed, does not go on."""
    db = fresh_database()
    apply_steps(embedded_engine, db, [])
    stalling = Stalling(embedded_engine, db, at=f"CREATE TABLE IF NOT EXISTS {db}.workers", seconds=0.8)
    with pytest.raises(Exception, match="taken over"):
        apply_steps(stalling, db, schema.MIGRATIONS[:1], lease_seconds=0.4)
    assert one_value(embedded_engine, f"SELECT count() FROM {db}.schema_version") == 0


class Stalling:
    """An engine that runs one statement at a time, as the embedded engine does, and stalls ``seconds`` before the
    statement starting with ``at``; meanwhile another migrator, seeing the lease expired, claims the next one."""

    def __init__(self, engine: Engine, db: str, at: str, seconds: float) -> None:
        self._engine, self._db, self._at, self._seconds = engine, db, at, seconds
        self._one = threading.Lock()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._engine, name)

    def query(self, sql: str, params: dict[str, Any] | None = None) -> pa.Table:
        with self._one:
            return self._engine.query(sql, params)

    def command(self, sql: str, params: dict[str, Any] | None = None) -> None:
        with self._one:
            if sql.startswith(self._at):
                time.sleep(self._seconds)
                self._engine.command(
                    f"INSERT INTO {self._db}.schema_lease SELECT 2, 'another', now64(3) + toIntervalSecond(60), 0"
                )
            self._engine.command(sql, params)
