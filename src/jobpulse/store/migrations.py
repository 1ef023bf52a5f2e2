"""Applying the schema's migration steps: once, however many servers start at once, and resumably.

- **Versions** (``migration_records.py``). ``schema_version`` holds a row per step applied; ``schema_progress`` a
  row per statement of a step that must not run twice (``statements.is_idempotent``), done, so that a step
  interrupted half-way goes on from where it stopped; idempotent statements simply run again. A database at
  version 0 never held data (servers serve only once migrated): it is made by every step in one go, recorded at the
  end, and what an interrupted first creation left is dropped before it starts again.
- **A lease in the store.** Only the holder of the lease applies steps; every other server waits until the version
  it needs is recorded. A lease is claimed by inserting a row with a deduplication token named after the lease's
  number: the engine keeps the first insert of a token and drops the others (``insert_deduplication_token``, in
  Keeper for a replicated table), so of migrators claiming one number at once exactly one row is stored, and each
  reads back whether it is its own. The holder renews the lease from a thread while it works; a lease not renewed
  expires, and a crashed migrator holds the others up for at most ``lease_seconds``. Before each statement the
  holder makes sure that no other migrator claimed a newer lease.
- **Idempotent statements, resumable rebuilds.** Until its first statement that must not run twice has run, a
  migrator's statements in a step may have run before (the migrator that ran them stopped before recording them):
  a rebuild's ``CREATE TABLE`` of a table that exists drops it first, its ``INSERT ... SELECT`` into a table made by
  the step empties the table first, a ``RENAME`` finishes the pairs not yet renamed, and a ``DROP`` of a table
  already gone is skipped. So a rebuild (create ``X_vN``, fill it, swap with ``RENAME``, drop the old table)
  copies, then swaps, and can be resumed at any point.

On a cluster every statement is run in its cluster form (``cluster_schema.py``), and the migrations' own tables
are replicated on every node; before reading them, a node fetches what the others wrote (``SYSTEM SYNC REPLICA``).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Protocol

from ..errors import StoreUnavailable
from .cluster_schema import ClusterSchema
from .engine import Engine
from .migration_records import BOOKKEEPING, Books, Lease
from .statements import Statement, UnknownStatement, is_idempotent, parse_statement

LEASE_SECONDS = 60.0
POLL_SECONDS = 0.25


class Dialect(Protocol):
    """How a statement of the schema description runs on this store."""

    def statements(self, text: str) -> list[str]: ...

    def physical(self, table: str) -> str: ...


class SingleServer:
    """One server (the embedded engine or a ClickHouse server): every statement runs as written."""

    def statements(self, text: str) -> list[str]:
        return [text]

    def physical(self, table: str) -> str:
        return table


def dialect_for(db: str, cluster: str) -> Dialect:
    return ClusterSchema(db, cluster) if cluster else SingleServer()


def apply_steps(
    engine: Engine,
    db: str,
    steps: Sequence[Sequence[str]],
    *,
    cluster: str = "",
    lease_seconds: float = LEASE_SECONDS,
    poll_seconds: float = POLL_SECONDS,
) -> int:
    """Bring ``db`` to the version of ``steps`` (statements with ``{db}``); answers the version it was at before.
    ``cluster``: the ClickHouse cluster to create the schema on (``ON CLUSTER``); empty for one server."""
    dialect = dialect_for(db, cluster)
    books = Books(engine, db, cluster)
    made = books.made()
    for text in BOOKKEEPING:
        statements = dialect.statements(text.format(db=db))  # a cluster's schema follows every statement
        if not made:
            _create(engine, statements)
    before = version = books.version()
    lease = Lease(engine, books, lease_seconds)
    while version < len(steps):
        if lease.acquire():  # the runner reads the version again: another may have finished meanwhile
            with lease.kept():
                _Runner(engine, db, dialect, books, lease).run(steps)
            break
        time.sleep(poll_seconds)
        version = books.version()
    return before


def _create(engine: Engine, statements: list[str]) -> None:
    """Run CREATE ... IF NOT EXISTS statements that several servers may run at once: one that finds what it creates
    made by another in the meantime succeeded."""
    for sql in statements:
        try:
            engine.command(sql)
        except StoreUnavailable as exc:
            if "already exists" not in str(exc).lower():
                raise


class _Runner:
    """Applies the steps newer than the recorded version, statement by statement, for the lease's holder."""

    def __init__(self, engine: Engine, db: str, dialect: Dialect, books: Books, lease: Lease) -> None:
        self.engine, self.db, self.dialect, self.books, self.lease = engine, db, dialect, books, lease

    def run(self, steps: Sequence[Sequence[str]]) -> None:
        current = self.books.version()
        if current == 0:
            self._create_fresh(steps)
            return
        done = self.books.done_after(current)
        for number, step in enumerate(steps, start=1):
            texts = [text.format(db=self.db) for text in step]
            if number <= current:
                for text in texts:
                    self.dialect.statements(text)  # a cluster's schema follows what each statement did
                continue
            self._run_step(number, texts, done.get(number, set()))
            self.books.finish(number)

    def _create_fresh(self, steps: Sequence[Sequence[str]]) -> None:
        """A database at version 0 never held data (servers serve only once migrated): its schema is made by every
        step in one go and recorded at the end; what an interrupted first creation left is dropped first."""
        texts = [text.format(db=self.db) for step in steps for text in step]
        self._drop_leftovers(texts)
        for text in texts:
            self.lease.check()
            self._execute(text)
        self.books.finish_all(len(steps))

    def _drop_leftovers(self, texts: list[str]) -> None:
        """Drop the tables and views of ``texts`` that exist (left by an interrupted first creation)."""
        names = set()
        for text in texts:
            try:
                statement = parse_statement(text)
            except UnknownStatement:
                continue
            made = [statement.table] if statement.kind in ("create_table", "create_copy", "create_view") else []
            made += [name for pair in statement.pairs for name in pair]  # a rename's tables
            names |= {name for table in made for name in (table, f"{table}_local")}
        found = self.engine.query(
            "SELECT name, engine FROM system.tables WHERE database = {db:String} AND name IN {names:Array(String)} "
            "ORDER BY engine = 'MaterializedView' DESC, engine = 'Distributed' DESC",
            {"db": self.db, "names": sorted(names)},
        ).to_pylist()
        on_cluster = f" ON CLUSTER {self.books.cluster}" if self.books.cluster else ""
        for row in found:
            self.engine.command(f"DROP TABLE IF EXISTS {self.db}.{row['name']}{on_cluster}")

    def _run_step(self, number: int, texts: list[str], done: set[int]) -> None:
        """Run the statements of step ``number`` not recorded as done. Until the first statement that is not
        idempotent has run, each may have run before without being recorded (``_resume``); idempotent statements
        are not recorded, they run again on a resumption."""
        resuming = True
        for index, text in enumerate(texts):
            if index in done:
                self.dialect.statements(text)
                continue
            once = not is_idempotent(text)
            self.lease.check()
            if not (resuming and self._resume(text, texts[:index])):
                self._execute(text)
            if once:
                resuming = False
                self.books.record(number, index)

    def _execute(self, text: str) -> None:
        for sql in self.dialect.statements(text):
            self.engine.command(sql)

    def _exists(self, table: str) -> bool:
        found = self.engine.query(
            "SELECT count() AS n FROM system.tables WHERE database = {db:String} AND name = {name:String}",
            {"db": self.db, "name": self.dialect.physical(table)},
        )
        return bool(found.column("n")[0].as_py())

    def _resume(self, text: str, earlier: list[str]) -> bool:
        """Make a statement that may have run before (one up to the first of its step that must not run twice)
        safe to run again; answers True when this has done all the statement does."""
        try:
            statement = parse_statement(text)
        except UnknownStatement:
            return False
        if (
            statement.kind in ("create_table", "create_copy")
            and not statement.guarded
            and self._exists(statement.table)
        ):
            self._execute(f"DROP TABLE IF EXISTS {self.db}.{statement.table}")  # a copy begun and not recorded
        elif statement.kind == "insert_select" and self._filled_in_step(statement, earlier):
            self._execute(f"TRUNCATE TABLE {self.db}.{statement.table}")  # a fill begun and not recorded
        elif statement.kind == "rename":
            return self._finish_rename(statement)
        elif statement.kind == "drop" and not statement.guarded:
            self._execute(f"DROP {'VIEW' if statement.view else 'TABLE'} IF EXISTS {self.db}.{statement.table}")
            return True
        return False

    def _filled_in_step(self, statement: Statement, earlier: list[str]) -> bool:
        """Whether ``statement`` fills a table an earlier statement of its step made, and rows are in it."""
        made = False
        for text in earlier:
            try:
                parsed = parse_statement(text)
            except UnknownStatement:
                continue
            made = made or (parsed.kind in ("create_table", "create_copy") and parsed.table == statement.table)
        if not made:
            return False
        rows = self.engine.query(f"SELECT count() AS n FROM {self.db}.{statement.table}")
        return bool(rows.column("n")[0].as_py())

    def _finish_rename(self, statement: Statement) -> bool:
        olds, news = [old for old, _ in statement.pairs], [new for _, new in statement.pairs]
        exists = {name: self._exists(name) for name in {*olds, *news}}
        if all(exists[old] for old in olds) and not any(exists[n] for n in set(news) - set(olds)):
            return False  # nothing renamed yet: the statement runs as written
        finished = all(exists[n] for n in news) and not any(exists[o] for o in set(olds) - set(news))
        for old, new in statement.pairs:
            sqls = self.dialect.statements(f"RENAME TABLE {self.db}.{old} TO {self.db}.{new}")
            if not finished and exists[old] and not exists[new]:
                for sql in sqls:
                    self.engine.command(sql)
                exists[old], exists[new] = False, True
            elif finished or (exists[new] and not exists[old]):
                for sql in sqls[1:]:  # renamed before; on a cluster, its Distributed table is made again
                    self.engine.command(sql)
            else:
                state = "both tables exist" if exists[old] else "neither table exists"
                raise StoreUnavailable(f"cannot finish renaming {self.db}.{old} to {new}: {state}")
        return True
