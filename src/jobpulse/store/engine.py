"""Transports that run ClickHouse SQL: the embedded engine (chdb) and a ClickHouse server (HTTP).

Both take the same SQL with ``{name:Type}`` parameters and exchange columns as Arrow tables,
so everything above this module is transport-agnostic.
"""

from __future__ import annotations

import contextlib
import queue
import threading
from collections.abc import Iterator
from typing import Any, Protocol
from urllib.parse import unquote, urlparse

import pyarrow as pa

from ..errors import BadRequest, StoreUnavailable

# Queries name results after the columns they come from (``toUnixTimestamp64Milli(ts) AS ts``);
# ``prefer_column_name_to_alias`` makes WHERE, GROUP BY and ORDER BY keep meaning the stored column.
# An insert of system samples feeds two materialized views (the per-minute and per-hour rollups): built
# side by side, 288,000 samples took 132-146 ms in-process instead of 162-182 ms.
SESSION_SETTINGS = {"prefer_column_name_to_alias": 1, "parallel_view_processing": 1}
# On a cluster (docs/deploy.md): an insert into a Distributed table is acknowledged once every shard stored its rows,
# not when they are queued on the node that took them; ``IN (SELECT ... FROM <distributed>)`` reads each shard's own
# rows, which holds because every sharded table is sharded alike, by job.
# A delete runs on each node's local tables (cluster_schema.delete_on_cluster); one whose condition reads another
# table (the log lines whose fields go) reads that table's rows of the same shard, which the engine counts as not
# deterministic on a replicated table.
CLUSTER_SETTINGS = {
    "distributed_foreground_insert": 1,
    "distributed_product_mode": "local",
    "allow_nondeterministic_mutations": 1,
}


class Failures:
    """How many statements failed in the store, by statement (query, command, insert); read by the server's
    metrics. A statement refused for its own parameter values (a caller's bad input) is not counted."""

    STATEMENTS = ("query", "command", "insert")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts = dict.fromkeys(self.STATEMENTS, 0)

    def failed(self, statement: str, exc: Exception) -> Exception:
        """The error to raise for ``exc``, counted when it is the store's."""
        error = _translate(exc)
        if isinstance(error, StoreUnavailable):
            with self._lock:
                self._counts[statement] += 1
        return error

    def counts(self) -> dict[str, int]:
        with self._lock:
            return dict(self._counts)


class Engine(Protocol):
    """What the store needs from a transport."""

    name: str
    failures: Failures

    def query(self, sql: str, params: dict[str, Any] | None = None) -> pa.Table: ...

    def command(self, sql: str, params: dict[str, Any] | None = None) -> None: ...

    def insert(self, table: str, data: pa.Table, settings: dict[str, Any] | None = None) -> None: ...

    def close(self) -> None: ...


class EmbeddedEngine:
    """ClickHouse inside this process through chdb; one data directory per process.

    Statements run on a pool of connections to the data directory: each caller takes one for the length of its
    statement (a new one when every connection is busy, up to ``max_connections``; then it waits for one), so a
    read never waits for an insert and the inserts of one batch can run side by side. There is no process-wide
    lock: waiting for a connection releases the GIL, and a connection runs one statement at a time.
    """

    name = "embedded"
    cluster = ""  # never part of a cluster
    stream_rows = 100_000
    max_connections = 8
    _lock = threading.Lock()
    _open_paths: set[str] = set()

    def __init__(self, path: str) -> None:
        try:
            import chdb  # imported here: ~0.5 s and a few hundred MB, server only
        except ImportError as exc:
            raise StoreUnavailable(
                "the embedded store needs chdb, which this install lacks (pip install 'jobpulse[server]'); "
                "or run with --store clickhouse://user:password@host:8123/database"
            ) from exc

        with EmbeddedEngine._lock:
            if EmbeddedEngine._open_paths and path not in EmbeddedEngine._open_paths:
                raise StoreUnavailable(
                    f"this process already has an embedded store open at {sorted(self._open_paths)[0]}; "
                    "one process can own one data directory"
                )
            EmbeddedEngine._open_paths.add(path)
        self.path = path
        self.failures = Failures()
        self._connect = chdb.connect
        self._idle: queue.LifoQueue = queue.LifoQueue()
        self._opened: list[Any] = []
        self._opening = threading.Lock()
        self._closed = False
        self._idle.put(self._open())  # the first connection opens the data directory, or fails here

    def _open(self) -> Any:
        """A new connection to the data directory, with the session settings every statement assumes."""
        connection = self._connect(self.path)
        for name, value in SESSION_SETTINGS.items():
            connection.query(f"SET {name} = {value}", "Null")
        self._opened.append(connection)
        return connection

    @contextlib.contextmanager
    def _connection(self) -> Iterator[Any]:
        """An idle connection for one statement: a new one while fewer than ``max_connections`` are open."""
        if self._closed:
            raise StoreUnavailable("the embedded store is closed")
        try:
            connection = self._idle.get_nowait()
        except queue.Empty:
            with self._opening:
                opened = len(self._opened) < self.max_connections and not self._closed
                connection = self._open() if opened else None
            if connection is None:
                connection = self._idle.get()
        try:
            yield connection
        finally:
            self._idle.put(connection)

    def query(self, sql: str, params: dict[str, Any] | None = None) -> pa.Table:
        try:
            with self._connection() as connection:
                return connection.query(sql, "ArrowTable", params=_text_params(params))
        except Exception as exc:  # chdb raises plain RuntimeError for every SQL failure
            raise self.failures.failed("query", exc) from exc

    def command(self, sql: str, params: dict[str, Any] | None = None) -> None:
        try:
            with self._connection() as connection:
                connection.query(sql, "Null", params=_text_params(params))
        except Exception as exc:
            raise self.failures.failed("command", exc) from exc

    def insert(self, table: str, data: pa.Table, settings: dict[str, Any] | None = None) -> None:
        """Up to ``stream_rows`` rows go to the engine as an Arrow IPC stream, which costs ~1.5 ms less
        per statement than the ``Python()`` table function (a batch of 1,000 points, three inserts: 28
        -> 16 ms); larger tables go through ``Python()``, which converts plain strings into
        ``LowCardinality`` columns faster (288,000 system samples: 173 vs 185 ms)."""
        columns = ", ".join(f"`{c}`" for c in data.column_names)
        given = ", ".join(f"{k} = {_text_value(v, True)}" for k, v in (settings or {}).items())
        statement = f"INSERT INTO {table} ({columns})" + (f" SETTINGS {given}" if given else "")
        try:
            if data.num_rows > self.stream_rows:
                arrow_rows = data  # noqa: F841 - read by name by the Python() table function below
                with self._connection() as connection:
                    connection.query(f"{statement} SELECT * FROM Python(arrow_rows)", "Null")
                return
            stream = _ipc_stream(data)
            with self._connection() as connection, connection.send_insert(statement, "ArrowStream") as pending:
                pending.append(stream)  # on an error the insert is cancelled unfinished: nothing is stored
                pending.finish()
        except Exception as exc:
            raise self.failures.failed("insert", exc) from exc

    def close(self) -> None:
        """Close every connection, once each is idle (a statement running on one finishes first)."""
        with self._opening:
            if self._closed:
                return
            self._closed = True
            opened = list(self._opened)
        for _ in opened:
            self._idle.get().close()
        with EmbeddedEngine._lock:
            EmbeddedEngine._open_paths.discard(self.path)


class HttpEngine:
    """A ClickHouse server or cluster over HTTP through clickhouse-connect; ``cluster``: the name of the ClickHouse
    cluster the server belongs to, when the schema is laid out on it (cluster_schema.py)."""

    name = "clickhouse"

    def __init__(self, url: str, cluster: str = "") -> None:
        import clickhouse_connect

        parts = urlparse(url)
        if parts.scheme not in ("clickhouse", "clickhouses", "http", "https"):
            raise BadRequest(f"store URL must start with clickhouse:// or clickhouses://, got {url!r}")
        secure = parts.scheme in ("clickhouses", "https")
        self.database = (parts.path or "/").strip("/") or "jobpulse"
        self._client = clickhouse_connect.get_client(
            host=parts.hostname or "127.0.0.1",
            port=parts.port or (8443 if secure else 8123),
            username=unquote(parts.username or "default"),
            password=unquote(parts.password or ""),
            secure=secure,
            autogenerate_session_id=False,
            settings={**SESSION_SETTINGS, **(CLUSTER_SETTINGS if cluster else {})},
        )
        self.cluster = cluster
        self.sharded: frozenset[str] = frozenset()  # on a cluster, the tables whose rows are sharded (Store sets it)
        self.failures = Failures()

    def query(self, sql: str, params: dict[str, Any] | None = None) -> pa.Table:
        try:
            return self._client.query_arrow(sql, parameters=params or None, use_strings=True)
        except Exception as exc:
            raise self.failures.failed("query", exc) from exc

    def command(self, sql: str, params: dict[str, Any] | None = None) -> None:
        if self.cluster and sql.lstrip()[:6].upper() == "DELETE":
            from .cluster_schema import delete_on_cluster

            sql = delete_on_cluster(sql, self.cluster, self.sharded)
        try:
            self._client.command(sql, parameters=params or None)
        except Exception as exc:
            raise self.failures.failed("command", exc) from exc

    def insert(self, table: str, data: pa.Table, settings: dict[str, Any] | None = None) -> None:
        """The rows go as an Arrow IPC file, which allows one dictionary per column: record batches that
        dictionary-encode a column each their own way share one first."""
        try:
            self._client.insert_arrow(table, data.unify_dictionaries(), settings=settings)
        except Exception as exc:
            raise self.failures.failed("insert", exc) from exc

    def close(self) -> None:
        self._client.close()


def _ipc_stream(data: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, data.schema) as writer:
        writer.write_table(data)
    return sink.getvalue().to_pybytes()


def _escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace("'", "\\'").replace("\n", "\\n").replace("\t", "\\t")


def _text_value(value: Any, quoted: bool) -> str:
    if isinstance(value, str):
        return f"'{_escape(value)}'" if quoted else _escape(value)
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, tuple):
        return "(" + ",".join(_text_value(v, True) for v in value) + ")"
    if isinstance(value, list):
        return "[" + ",".join(_text_value(v, True) for v in value) + "]"
    if value is None:
        return "NULL" if quoted else "\\N"
    return str(value)


def _text_params(params: dict[str, Any] | None) -> dict[str, str] | None:
    """chdb takes parameter values in ClickHouse's escaped text form; the HTTP client formats its own."""
    if not params:
        return None
    return {name: _text_value(value, False) for name, value in params.items()}


def _translate(exc: Exception) -> Exception:
    text = str(exc)
    # Errors caused by the query's input (bad parameter values) are the caller's, not the store's.
    if "query parameter" in text:
        return BadRequest(f"invalid query parameter: {text.splitlines()[0][:300]}")
    return StoreUnavailable(f"storage engine error: {text.splitlines()[0][:500] if text else type(exc).__name__}")


def ping(engine: Engine) -> None:
    """Raise unless the store answers a one-row query: whether it is reachable and accepts this server."""
    engine.query("SELECT 1 AS ok")
