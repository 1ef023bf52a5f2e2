"""The migrations' own records in the store: the versions applied, the statements done, and the lease that lets one
migrator at a time apply steps (``migrations.py`` tells how they are used).

A lease is claimed by inserting a row with a deduplication token named after the lease's number: the engine keeps
the first insert of a token and drops the others (``insert_deduplication_token``, in Keeper for a replicated table),
so of migrators claiming one number at once exactly one row is stored, and each reads back whether it is its own.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

from ..errors import StoreUnavailable
from .engine import Engine

_log = logging.getLogger(__name__)

BOOKKEEPING = (
    "CREATE DATABASE IF NOT EXISTS {db}",
    "CREATE TABLE IF NOT EXISTS {db}.schema_version (version UInt32, applied DateTime64(3)) "
    "ENGINE = MergeTree ORDER BY version",
    "CREATE TABLE IF NOT EXISTS {db}.schema_progress (version UInt32, statement UInt32, done DateTime64(3)) "
    "ENGINE = MergeTree ORDER BY (version, statement)",
    "CREATE TABLE IF NOT EXISTS {db}.schema_lease (lease UInt64, holder String, expires DateTime64(3), released UInt8)"
    " ENGINE = MergeTree ORDER BY lease SETTINGS non_replicated_deduplication_window = 1000",
)


class Books:
    """The migrations' own tables: versions applied, statements done."""

    TABLES = ("schema_version", "schema_progress", "schema_lease")

    def __init__(self, engine: Engine, db: str, cluster: str) -> None:
        self.engine, self.db, self.cluster = engine, db, cluster

    def sync(self, table: str) -> None:
        """On a cluster, fetch what other nodes wrote to one of the migrations' tables before reading it."""
        if self.cluster:
            self.engine.command(f"SYSTEM SYNC REPLICA {self.db}.{table}")

    def made(self) -> bool:
        """Whether the migrations' own tables are there (on a cluster, DDL waits for every node: a server whose
        database is made starts while a node is down)."""
        found = self.engine.query(
            "SELECT count() AS n FROM system.tables WHERE database = {db:String} AND name IN {names:Array(String)}",
            {"db": self.db, "names": list(self.TABLES)},
        )
        return found.column("n")[0].as_py() == len(self.TABLES)

    def version(self) -> int:
        self.sync("schema_version")
        table = self.engine.query(f"SELECT max(version) AS v FROM {self.db}.schema_version")
        return int(table.column("v")[0].as_py() or 0)

    def done_after(self, version: int) -> dict[int, set[int]]:
        """The statements recorded as done of each step newer than ``version``."""
        self.sync("schema_progress")
        table = self.engine.query(
            f"SELECT version, statement FROM {self.db}.schema_progress WHERE version > {{v:UInt32}}", {"v": version}
        )
        done: dict[int, set[int]] = {}
        for step, statement in zip(
            table.column("version").to_pylist(), table.column("statement").to_pylist(), strict=True
        ):
            done.setdefault(step, set()).add(statement)
        return done

    def record(self, version: int, statement: int) -> None:
        self.engine.command(
            f"INSERT INTO {self.db}.schema_progress VALUES ({{v:UInt32}}, {{s:UInt32}}, now64(3))",
            {"v": version, "s": statement},
        )

    def finish_all(self, versions: int) -> None:
        """Record versions 1 to ``versions`` as applied, at once."""
        self.engine.command(
            f"INSERT INTO {self.db}.schema_version SELECT toUInt32(number + 1), now64(3) FROM numbers({{n:UInt32}})",
            {"n": versions},
        )

    def finish(self, version: int) -> None:
        self.engine.command(f"INSERT INTO {self.db}.schema_version VALUES ({{v:UInt32}}, now64(3))", {"v": version})


class Lease:
    """The right to apply migration steps, held by one migrator at a time (``holder``) until it is released or
    expires."""

    def __init__(self, engine: Engine, books: Books, seconds: float) -> None:
        self.engine, self.books, self.seconds = engine, books, seconds
        self.holder = uuid.uuid4().hex
        self.number = 0
        self.lost = False
        self._renewals = 0
        self._renewed_at = 0.0  # when a claim or renewal of this migrator's was last stored (monotonic clock)

    def latest(self) -> tuple[int, str, int, bool] | None:
        """The newest lease: its number, holder, milliseconds left and whether it was released."""
        self.books.sync("schema_lease")
        table = self.engine.query(
            f"""SELECT lease, holder, max(released) AS released,
                toInt64(toUnixTimestamp64Milli(max(expires)) - toUnixTimestamp64Milli(now64(3))) AS left_ms
            FROM {self.books.db}.schema_lease GROUP BY lease, holder ORDER BY lease DESC, min(expires) LIMIT 1"""
        ).to_pylist()
        if not table:
            return None
        row = table[0]
        return int(row["lease"]), row["holder"], int(row["left_ms"]), bool(row["released"])

    def acquire(self) -> bool:
        """Claim the lease if it is free; answers whether this migrator holds it."""
        latest = self.latest()
        if latest and latest[1] == self.holder and latest[2] > 0 and not latest[3]:
            return True
        if latest and latest[2] > 0 and not latest[3]:
            return False  # held by another migrator
        number = latest[0] + 1 if latest else 1
        self._renewed_at = time.monotonic()
        self._write(number, f"claim-{number}", released=False)
        latest = self.latest()
        if latest and latest[0] == number and latest[1] == self.holder:
            self.number = number
            return True
        return False

    def check(self) -> None:
        """Raise unless this migrator still holds the lease. Another migrator claims the next lease only once this
        one expired, so while a renewal succeeded within half a lease nothing is asked of the store. A lease that
        expired while a long statement ran (on the embedded engine the renewals wait for it) is still this
        migrator's until another one claims the next: it is renewed at once."""
        if not self.lost and time.monotonic() - self._renewed_at < self.seconds / 2:
            return
        self.renew()
        if self.lost:
            raise StoreUnavailable(f"the schema migration lease {self.number} was taken over by another migrator")

    def renew(self) -> None:
        """Extend the lease, unless another migrator took it over (then ``lost``)."""
        latest = self.latest()
        if not latest or latest[:2] != (self.number, self.holder) or latest[3]:
            self.lost = True
            return
        self._renewals += 1
        self._write(self.number, f"renew-{self.number}-{self.holder}-{self._renewals}", released=False)
        self._renewed_at = time.monotonic()

    def release(self) -> None:
        self._write(self.number, f"release-{self.number}-{self.holder}", released=True)

    @contextmanager
    def kept(self) -> Iterator[None]:
        """Renew the lease from a thread of its own while the block runs; release it at the end."""
        stop = threading.Event()

        def renew_until_stopped() -> None:
            while not stop.wait(self.seconds / 4):
                try:
                    self.renew()
                except Exception as exc:  # the next check() tells the migrator; this thread must go on
                    _log.warning("renewing the schema migration lease failed: %s", exc)

        thread = threading.Thread(target=renew_until_stopped, name="jobpulse-schema-lease", daemon=True)
        thread.start()
        try:
            yield
        finally:
            stop.set()
            thread.join()
            self.release()

    def _write(self, number: int, token: str, *, released: bool) -> None:
        expires = 0 if released else int(self.seconds * 1000)
        self.engine.command(
            f"INSERT INTO {self.books.db}.schema_lease (lease, holder, expires, released) "
            f"SETTINGS insert_deduplication_token = 'jobpulse-schema-{token}' "
            "SELECT {n:UInt64}, {holder:String}, now64(3) + toIntervalMillisecond({ms:Int64}), {released:UInt8}",
            {"n": number, "holder": self.holder, "ms": expires, "released": int(released)},
        )
