"""The schema on a ClickHouse cluster, generated from the one schema description (``schema.MIGRATIONS``).

Each statement of a migration step is read into its parts (``statements.py``) and written again in its cluster
form (``ClusterSchema.statements``):

- a table with a ``job`` column is sharded by job: its rows live in ``db.X_local``, a Replicated*MergeTree table
  on every node, and ``db.X`` is a Distributed table over them, sharded by ``cityHash64(job)`` - a job's rows, and
  so its rollups, are on one shard. Reads and inserts name ``db.X`` and so work unchanged;
- a table without a ``job`` column (keys, sessions, server state, the migrations' own tables) is small and read by
  every request: ``db.X`` is a Replicated*MergeTree table with one replica on every node of the cluster;
- a materialized view reads and writes the local tables, so that each shard keeps its own rollups;
- every DDL statement runs ``ON CLUSTER``; a rebuild's ``INSERT ... SELECT`` runs on each shard at once.

Replication paths hold the table's UUID (``{uuid}``), so that a table renamed by a rebuild, or created again under
a dropped table's name, never meets another table's replicas in Keeper; ``{shard}`` and ``{replica}`` are macros of
each node's configuration. Statements are ours: a shape this module does not know is refused
(``UnknownStatement``) rather than written wrong.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

from .engine import Engine
from .statements import (
    ALTER_COMMAND,
    ENGINE_CLAUSE,
    FLAGS,
    Statement,
    UnknownStatement,
    closing_paren,
    column_names,
    parse_statement,
    split_top_level,
)

SHARDING_KEY = "cityHash64(job)"
SHARD_PATH = "/clickhouse/tables/{uuid}/{shard}"
EVERYWHERE_PATH = "/clickhouse/tables/{uuid}/all"
CLUSTER_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,62}")
_KINDS = ("", "Replacing", "Aggregating", "Summing", "Collapsing", "VersionedCollapsing")
_CODEC = re.compile(r"\s+CODEC\s*\(", FLAGS)


def replicated_engine(engine: str, *, sharded: bool) -> str:
    """``ENGINE = <Kind>MergeTree[(args)] ...`` as its Replicated form, replicated within a shard (``sharded``) or
    on every node of the cluster."""
    found = ENGINE_CLAUSE.fullmatch(engine.strip())
    name = found.group(1) if found else ""
    kind = name.removesuffix("MergeTree")
    if not found or not name.endswith("MergeTree") or kind not in _KINDS:
        raise UnknownStatement(f"no replicated form for engine: {engine[:100]}")
    rest = found.group(2)
    args = ""
    if rest.startswith("("):
        end = closing_paren(rest, 0)
        args, rest = rest[1:end].strip(), rest[end + 1 :]
    path = SHARD_PATH if sharded else EVERYWHERE_PATH
    arguments = ", ".join(a for a in (f"'{path}'", "'{replica}'", args) if a)
    return f"ENGINE = Replicated{kind}MergeTree({arguments}) {rest.strip()}".rstrip()


def without_codecs(command: str) -> str:
    """An ALTER command's column declaration without its CODEC(...) (Distributed tables store no data)."""
    found = _CODEC.search(command)
    while found:
        end = closing_paren(command, found.end() - 1)
        command = command[: found.start()] + command[end + 1 :]
        found = _CODEC.search(command)
    return command


@dataclass
class _Table:
    columns: tuple[str, ...]
    engine: str  # as the schema description writes it (not replicated)

    @property
    def sharded(self) -> bool:
        return "job" in self.columns


@dataclass
class ClusterSchema:
    """The cluster form of the schema's statements for database ``db`` on cluster ``cluster``. It follows the
    tables the statements create, copy, rename and drop, so it must see every statement in order, from the first
    step on (``statements`` for each, whether it is run or was run before)."""

    db: str
    cluster: str
    tables: dict[str, _Table] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not CLUSTER_NAME.fullmatch(self.cluster):
            raise ValueError(
                f"cluster name must be letters, digits and _ (a ClickHouse identifier), got {self.cluster!r}"
            )

    def sharded(self, table: str) -> bool:
        return table in self.tables and self.tables[table].sharded

    def physical(self, table: str) -> str:
        """The name under which ``table``'s rows are stored on a node: ``X_local`` for a sharded table."""
        return f"{table}_local" if self.sharded(table) else table

    def statements(self, text: str) -> list[str]:
        """The statements that do on the cluster what ``text`` does on one server, in order."""
        statement = parse_statement(text)
        if statement.db != self.db:
            raise UnknownStatement(f"statement on database {statement.db}, not {self.db}")
        return getattr(self, f"_{statement.kind}")(statement)

    def _on(self, name: str) -> str:
        return f"{self.db}.{name} ON CLUSTER {self.cluster}"

    def _distributed(self, table: str, guard: str = "") -> str:
        return (
            f"CREATE TABLE {guard}{self._on(table)} AS {self.db}.{table}_local "
            f"ENGINE = Distributed({self.cluster}, {self.db}, {table}_local, {SHARDING_KEY})"
        )

    def _create_database(self, s: Statement) -> list[str]:
        return [f"CREATE DATABASE {'IF NOT EXISTS ' if s.guarded else ''}{s.db} ON CLUSTER {self.cluster}"]

    def _create_table(self, s: Statement) -> list[str]:
        table = _Table(column_names(s.body), s.engine)
        self.tables[s.table] = table
        engine = replicated_engine(s.engine, sharded=table.sharded)
        return self._placed(s, table.sharded, lambda _: f"({s.body}) {engine}")

    def _create_copy(self, s: Statement) -> list[str]:
        source = self._known(s.source)
        table = _Table(source.columns, s.engine or source.engine)
        self.tables[s.table] = table
        engine = replicated_engine(table.engine, sharded=table.sharded)
        return self._placed(s, table.sharded, lambda local: f"AS {self.db}.{s.source}{local} {engine}")

    def _placed(self, s: Statement, sharded: bool, definition: Callable[[str], str]) -> list[str]:
        """``CREATE TABLE`` of ``s.table`` as ``definition(suffix)`` defines it: on every node, or, ``sharded``, as
        its local table (suffix ``_local``) and the Distributed table over them."""
        guard = "IF NOT EXISTS " if s.guarded else ""
        if not sharded:
            return [f"CREATE TABLE {guard}{self._on(s.table)} {definition('')}"]
        local = f"CREATE TABLE {guard}{self._on(s.table + '_local')} {definition('_local')}"
        return [local, self._distributed(s.table, guard)]

    def _create_view(self, s: Statement) -> list[str]:
        sharded = self._known(s.source).sharded
        sources = self._sources(s.body)
        if any(self.tables[name].sharded != sharded for name in sources):
            raise UnknownStatement(f"view {s.table} joins sharded and unsharded tables")
        select = self._localised(s.body) if sharded else s.body
        guard = "IF NOT EXISTS " if s.guarded else ""
        return [
            f"CREATE MATERIALIZED VIEW {guard}{self._on(s.table)} TO {self.db}.{self.physical(s.source)} AS {select}"
        ]

    def _insert_select(self, s: Statement) -> list[str]:
        target = self._known(s.table)
        sources = self._sources(s.body)
        text = f"INSERT INTO {self.db}.{s.table} {s.body}"
        if target.sharded and sources and all(self.tables[name].sharded for name in sources):
            # both sides sharded by job: each shard fills its own part of the target from its own rows
            text += " SETTINGS parallel_distributed_insert_select = 2"
        return [text]

    def _alter(self, s: Statement) -> list[str]:
        table = self._known(s.table)
        commands = [c.strip() for c in split_top_level(s.body)]
        for command in commands:
            found = ALTER_COMMAND.match(command)
            if found and found.group(1) and found.group(1).upper() == "ADD":
                table.columns = (*table.columns, found.group(3))
            elif found and found.group(1) and found.group(1).upper() == "DROP":
                table.columns = tuple(c for c in table.columns if c != found.group(3))
        local = f"ALTER TABLE {self._on(self.physical(s.table))} {s.body}"
        columns = [without_codecs(c) for c in commands if ALTER_COMMAND.match(c).group(1)]
        if not table.sharded or not columns:
            return [local]
        return [local, f"ALTER TABLE {self._on(s.table)} {', '.join(columns)}"]

    def _drop(self, s: Statement) -> list[str]:
        if s.view:
            return [f"DROP VIEW {'IF EXISTS ' if s.guarded else ''}{self._on(s.table)}"]
        if s.table not in self.tables and not s.guarded:
            raise UnknownStatement(f"DROP of table {s.table}, which no statement created")
        known = self.tables.pop(s.table, None)
        distributed = f"DROP TABLE IF EXISTS {self._on(s.table)}"
        local = f"DROP TABLE {'IF EXISTS ' if s.guarded else ''}{self._on(s.table + '_local')}"
        if known is None:  # a leftover of an interrupted rebuild, if any: it could be of either kind
            return [distributed, local]
        return (
            [distributed, local]
            if known.sharded
            else [f"DROP TABLE {'IF EXISTS ' if s.guarded else ''}{self._on(s.table)}"]
        )

    def _rename(self, s: Statement) -> list[str]:
        moved = {old: self._known(old) for old, _ in s.pairs}
        pairs = ", ".join(
            f"{self.db}.{self.physical(old)} TO {self.db}.{self._renamed(old, new)}" for old, new in s.pairs
        )
        for old, _ in s.pairs:
            self.tables.pop(old)
        for old, new in s.pairs:
            self.tables[new] = moved[old]
        texts = [f"RENAME TABLE {pairs} ON CLUSTER {self.cluster}"]
        # Distributed tables name their local tables: the old names' go, the new names' are made again over the
        # tables now under those names (whose columns may differ from what the old Distributed table had)
        sharded = [(old, new) for old, new in s.pairs if moved[old].sharded]
        gone = {old for old, _ in sharded} - {new for _, new in sharded}
        texts += [f"DROP TABLE IF EXISTS {self._on(name)}" for name in sorted(gone)]
        for _, new in sharded:
            texts += [f"DROP TABLE IF EXISTS {self._on(new)}", self._distributed(new)]
        return texts

    def _renamed(self, old: str, new: str) -> str:
        return f"{new}_local" if self.sharded(old) else new

    def _truncate(self, s: Statement) -> list[str]:
        self._known(s.table)
        return [f"TRUNCATE TABLE {'IF EXISTS ' if s.guarded else ''}{self._on(self.physical(s.table))}"]

    def _delete(self, s: Statement) -> list[str]:
        sharded = frozenset(name for name, table in self.tables.items() if table.sharded)
        return [_delete_form(s, self.cluster, sharded)]

    def _known(self, table: str) -> _Table:
        if table not in self.tables:
            raise UnknownStatement(f"table {table} is not one the schema's statements created")
        return self.tables[table]

    def _sources(self, select: str) -> list[str]:
        names = re.findall(rf"\b{re.escape(self.db)}\.(\w+)\b", select)
        for name in names:
            self._known(name)
        return names

    def _localised(self, select: str) -> str:
        return re.sub(rf"\b{re.escape(self.db)}\.(\w+)\b", lambda m: f"{self.db}.{self.physical(m.group(1))}", select)


def sharded_tables(engine: Engine, db: str) -> frozenset[str]:
    """The tables of ``db`` whose rows are sharded (those with local tables ``X_local`` on this node)."""
    names = engine.query(
        "SELECT name FROM system.tables WHERE database = {db:String} AND endsWith(name, '_local')", {"db": db}
    ).column("name")
    return frozenset(name.removesuffix("_local") for name in names.to_pylist())


def delete_on_cluster(sql: str, cluster: str, sharded: frozenset[str]) -> str:
    """A lightweight ``DELETE FROM db.X WHERE ...`` of the store as its cluster form: Distributed tables take no
    deletes, so it runs on the local tables of every node, reading the local tables of its own shard where its
    condition reads a sharded table (a job's rows are all on one shard)."""
    statement = parse_statement(sql)
    if statement.kind != "delete":
        raise UnknownStatement(f"no cluster form for statement: {sql.strip()[:200]}")
    return _delete_form(statement, cluster, sharded)


def _delete_form(statement: Statement, cluster: str, sharded: frozenset[str]) -> str:
    db, table, condition = statement.db, statement.table, statement.body
    if table not in sharded:
        return f"DELETE FROM {db}.{table} ON CLUSTER {cluster} WHERE {condition}"
    local = re.sub(
        rf"\b{re.escape(db)}\.(\w+)\b",
        lambda m: f"{db}.{m.group(1)}_local" if m.group(1) in sharded else m.group(0),
        condition,
    )
    return f"DELETE FROM {db}.{table}_local ON CLUSTER {cluster} WHERE {local}"
