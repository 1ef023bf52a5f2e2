"""A test stand-in for a ClickHouse server: the part of ClickHouse's HTTP interface that clickhouse-connect uses,
executing every statement on the embedded engine (chdb).

It is not a ClickHouse server and must not be used as one: it exists so that the HTTP transport
(``--store clickhouse://...``) and several jobpulse server processes over one store can be tested on a machine
where no ClickHouse server installs. One stand-in process owns one chdb data directory; each request runs on a chdb
connection no other request is using at that moment, so several clients' statements run at once (there are no HTTP
sessions: settings and database come with each request).

What it speaks: ``GET``/``POST /`` with the statement in the ``query`` parameter and/or the body, ``param_<name>``
values in ClickHouse's escaped text form, any other query-string parameter as a setting of that statement, a
``database`` parameter, the same fields as ``multipart/form-data`` in the body (how clickhouse-connect sends bind
parameters longer than 4 KiB), request bodies compressed as lz4, zstd, gzip or deflate (``Content-Encoding``), inserts
named in the ``query`` parameter (``INSERT ... FORMAT <name>``) whose data is the body, and errors as ClickHouse
sends them (the ``Code: N. DB::Exception: ...`` text with ``X-ClickHouse-Exception-Code``). ``GET /ping``
answers ``Ok.``. Responses are not compressed (clickhouse-connect reads ``Content-Encoding``).

Run it as its own process: ``python -m jobpulse.testing_clickhouse --data-dir DIR [--port N]`` prints its URL
(``http://127.0.0.1:PORT``) on the first line of its output once it accepts connections; a jobpulse server
reaches it as ``--store clickhouse://127.0.0.1:PORT/DATABASE``. ``running_standin()`` does this for tests and
benchmarks.
"""

from __future__ import annotations

import argparse
import gzip
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from email import policy
from email.parser import BytesParser
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlsplit

# Query-string parameters that steer the HTTP exchange rather than the statement.
_TRANSPORT_PARAMS = frozenset(
    {
        "query",
        "database",
        "default_format",
        "query_id",
        "session_id",
        "session_timeout",
        "session_check",
        "compress",
        "decompress",
        "user",
        "password",
        "quota_key",
        "buffer_size",
        "wait_end_of_query",
        "enable_http_compression",
        "send_progress_in_http_headers",
        "http_headers_progress_interval_ms",
        "cancel_http_readonly_queries_on_client_close",
        "client_protocol_version",
    }
)
_FORMAT_AT_END = re.compile(r"\bFORMAT\s+([A-Za-z0-9_]+)\s*;?\s*$", re.IGNORECASE)
_INSERT = re.compile(r"^\s*INSERT\b", re.IGNORECASE)
_SETTING_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_ERROR_CODE = re.compile(r"Code:\s*(\d+)\.")
_BAD_REQUEST_CODES = frozenset({6, 26, 27, 36, 38, 41, 42, 43, 44, 47, 53, 62, 70, 72, 115, 117, 456, 457})
_NOT_FOUND_CODES = frozenset({60, 81})


def _form_fields(body: bytes, content_type: str) -> dict[str, str]:
    """The fields of a ``multipart/form-data`` body (the statement and its ``param_`` values), by name."""
    message = BytesParser(policy=policy.HTTP).parsebytes(f"Content-Type: {content_type}\r\n\r\n".encode() + body)
    fields = {}
    for part in message.iter_parts():
        name = part.get_param("name", header="content-disposition")
        if name:
            fields[str(name)] = (part.get_payload(decode=True) or b"").decode()
    return fields


class _Connection:
    """One chdb connection to the stand-in's data directory, with the settings and database it was last given."""

    def __init__(self, connection: Any) -> None:
        self.connection = connection
        self.settings: dict[str, str] = {}
        self.database = "default"

    def prepare(self, settings: dict[str, str], database: str) -> None:
        """Make the connection's settings those of this request: set what differs, put back what it leaves out."""
        for name in [name for name in self.settings if name not in settings]:
            self.connection.query(f"SET {name} = DEFAULT", "Null")
            del self.settings[name]
        for name, value in settings.items():
            if not _SETTING_NAME.fullmatch(name):
                raise ValueError(f"Code: 115. DB::Exception: Unknown setting '{name}'. (UNKNOWN_SETTING)")
            if self.settings.get(name) != value:
                self.connection.query(f"SET {name} = {_setting_literal(value)}", "Null")
                self.settings[name] = value
        if database != self.database:
            self.connection.query(f"USE `{database.replace('`', '``')}`", "Null")
            self.database = database


class StandInEngine:
    """Connections to one chdb data directory: each request runs its statement on one no other request is using,
    with that request's settings and database, so statements of several clients run at once, as on a server."""

    def __init__(self, data_dir: str) -> None:
        import chdb

        self._data_dir = data_dir
        self._connect = chdb.connect
        self._idle: list[_Connection] = [_Connection(chdb.connect(data_dir))]
        self._all = list(self._idle)
        self._lock = threading.Lock()

    @contextmanager
    def _connection(self, settings: dict[str, str], database: str) -> Iterator[_Connection]:
        with self._lock:
            held = self._idle.pop() if self._idle else None
        if held is None:
            held = _Connection(self._connect(self._data_dir))
            with self._lock:
                self._all.append(held)
        try:
            held.prepare(settings, database)
            yield held
        finally:
            with self._lock:
                self._idle.append(held)

    def execute(self, sql: str, settings: dict[str, str], params: dict[str, str], fmt: str, database: str) -> bytes:
        """Run ``sql``; answers its output in ``fmt`` unless the statement names its own FORMAT."""
        with self._connection(settings, database) as held:
            result = held.connection.query(sql, fmt, params=params or None)
            return result.bytes() if result is not None else b""

    def insert(self, statement: str, fmt: str, data: bytes, settings: dict[str, str], database: str) -> None:
        """Insert ``data`` (in ``fmt``) with ``statement`` (an INSERT without its FORMAT clause)."""
        with self._connection(settings, database) as held, held.connection.send_insert(statement, fmt) as pending:
            pending.append(data)
            pending.finish()

    def close(self) -> None:
        with self._lock:
            for held in self._all:
                held.connection.close()


def _setting_literal(value: str) -> str:
    if re.fullmatch(r"-?\d+(\.\d+)?", value):
        return value
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _decompress(data: bytes, encoding: str) -> bytes:
    encoding = encoding.strip().lower()
    if not encoding or encoding == "identity":
        return data
    if encoding == "lz4":
        import lz4.frame

        return lz4.frame.decompress(data)
    if encoding == "zstd":
        import zstandard

        return zstandard.ZstdDecompressor().decompressobj().decompress(data)
    if encoding == "gzip":
        return gzip.decompress(data)
    if encoding == "deflate":
        return zlib.decompress(data)
    raise ValueError(f"the stand-in cannot read a request body encoded as {encoding!r}")


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # A reply is written as its headers, then its body: with Nagle's algorithm on, the body waited for the client's
    # delayed acknowledgement of the headers, ~40 ms a statement, which a ClickHouse server does not add.
    disable_nagle_algorithm = True
    server: _StandInServer

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
        return

    def do_GET(self) -> None:  # noqa: N802 - http.server's naming
        self._serve()

    def do_POST(self) -> None:  # noqa: N802
        self._serve()

    def _serve(self) -> None:
        parts = urlsplit(self.path)
        if parts.path in ("/ping", "/") and self.command == "GET" and "query=" not in parts.query:
            self._reply(200, b"Ok.\n", {})
            return
        if parts.path != "/":
            self._reply(404, f"There is no handle {parts.path} in the stand-in\n".encode(), {})
            return
        try:
            body = _decompress(self._read_body(), self.headers.get("Content-Encoding", ""))
        except Exception as exc:  # a body we cannot read is the client's error, answered like ClickHouse does
            self._error(f"Code: 27. DB::Exception: Cannot read the request body: {exc}. (CANNOT_PARSE_INPUT)")
            return
        fields = dict(parse_qsl(parts.query, keep_blank_values=True))
        content_type = self.headers.get("Content-Type", "")
        if content_type.lower().startswith("multipart/form-data"):
            fields.update(_form_fields(body, content_type))
            body = b""
        try:
            output = self._run(fields, body)
        except Exception as exc:  # chdb raises one error type for every failure; its text is ClickHouse's
            self._error(str(exc) or type(exc).__name__)
            return
        self._reply(200, output, {"X-ClickHouse-Summary": '{"read_rows":"0","written_rows":"0"}'})

    def _run(self, fields: dict[str, str], body: bytes) -> bytes:
        query = fields.get("query", "")
        params = {name[len("param_") :]: value for name, value in fields.items() if name.startswith("param_")}
        settings = {
            name: value
            for name, value in fields.items()
            if name not in _TRANSPORT_PARAMS and not name.startswith("param_")
        }
        database = fields.get("database") or "default"
        engine = self.server.engine
        if _INSERT.match(query) and (found := _FORMAT_AT_END.search(query)) and body:
            engine.insert(query[: found.start()], found.group(1), body, settings, database)
            return b""
        sql = f"{query}\n{body.decode()}" if query and body else query or body.decode()
        return engine.execute(sql, settings, params, fields.get("default_format") or "TabSeparated", database)

    def _read_body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            chunks = []
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return b"".join(chunks)
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def _error(self, text: str) -> None:
        found = _ERROR_CODE.search(text)
        code = int(found.group(1)) if found else 1001
        status = 400 if code in _BAD_REQUEST_CODES else 404 if code in _NOT_FOUND_CODES else 500
        if not found:
            text = f"Code: {code}. DB::Exception: {text}. (STD_EXCEPTION)"
        self._reply(status, (text.rstrip() + "\n").encode(), {"X-ClickHouse-Exception-Code": str(code)})

    def _reply(self, status: int, payload: bytes, headers: dict[str, str]) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "application/octet-stream" if status == 200 else "text/plain; charset=UTF-8")
        self.send_header("Content-Length", str(len(payload)))
        self.send_header("X-ClickHouse-Server-Display-Name", "jobpulse-stand-in")
        self.send_header("X-ClickHouse-Timezone", "UTC")
        for name, value in headers.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(payload)


class _StandInServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address: tuple[str, int], engine: StandInEngine) -> None:
        super().__init__(address, _Handler)
        self.engine = engine


def serve(data_dir: str, port: int = 0, host: str = "127.0.0.1") -> None:
    """Serve the stand-in until the process is stopped; prints its URL once it accepts connections."""
    engine = StandInEngine(data_dir)
    with _StandInServer((host, port), engine) as server:
        print(f"http://{host}:{server.server_address[1]}", flush=True)
        try:
            server.serve_forever()
        except KeyboardInterrupt:
            pass
        finally:
            engine.close()


@contextmanager
def running_standin(data_dir: Path | None = None, timeout: float = 60.0) -> Iterator[str]:
    """A stand-in process on a free loopback port; answers its ``clickhouse://`` store URL, stopped at the end."""
    with tempfile.TemporaryDirectory(prefix="jobpulse-standin-") as tmp:
        root = Path(data_dir or tmp)
        root.mkdir(parents=True, exist_ok=True)
        log_path = root / "standin.log"
        with open(log_path, "wb") as log:
            process = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "jobpulse.testing_clickhouse",
                    "--data-dir",
                    str(root / "clickhouse"),
                    "--tied-to",
                    str(os.getpid()),
                ],
                stdout=subprocess.PIPE,
                stderr=log,
            )
        try:
            url = _await_url(process, log_path, timeout)
            yield "clickhouse://" + url.removeprefix("http://") + "/"
        finally:
            process.terminate()
            try:
                process.wait(20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
            if process.stdout is not None:
                process.stdout.close()


def _await_url(process: subprocess.Popen, log_path: Path, timeout: float) -> str:
    assert process.stdout is not None
    line = process.stdout.readline().decode().strip()
    if not line.startswith("http://"):
        process.wait(5)
        raise RuntimeError(f"the ClickHouse stand-in did not start:\n{log_path.read_text(errors='replace')}")
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(line + "/ping", timeout=2) as response:
                if response.status == 200:
                    return line
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"the ClickHouse stand-in at {line} did not answer within {timeout} s")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m jobpulse.testing_clickhouse",
        description="A test stand-in for ClickHouse's HTTP interface, executing on the embedded engine (chdb).",
    )
    parser.add_argument("--data-dir", required=True, help="directory of the stand-in's chdb data")
    parser.add_argument("--port", type=int, default=0, help="loopback port (default: a free one)")
    parser.add_argument("--tied-to", type=int, default=0, help="stop when the process of this id ends (Linux)")
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, _interrupt)
    if args.tied_to:
        _tie_to(args.tied_to)
    serve(args.data_dir, args.port)


def _interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt  # stops serve() the way Ctrl-C does, closing the chdb session


def _tie_to(starter: int) -> None:
    """Ask the kernel for SIGTERM when the starting process dies, so that a crashed test run leaves no stand-in
    behind; elsewhere than Linux the stand-in runs untied."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return
    if os.getppid() != starter:  # the starter died before the tie was made
        sys.exit(1)


if __name__ == "__main__":
    main()
