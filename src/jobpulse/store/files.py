"""Uploaded files (debug images, artifacts) in the store, so that every replica serves every file.

Two tables (schema step 15):

- ``files``: one row per (job, name) naming the file's newest ``version``, its size, its number of chunks and its
  first bytes (``head``: what decides how the file is served, ``server/headers.py``); a ReplacingMergeTree on
  ``version``, read with ``FINAL``. A deleted file is a row too (``deleted``), so that a deletion replaces the
  versions before it and nothing after it.
- ``file_chunks``: the bytes of each version in chunks of ``CHUNK_BYTES`` (1 MiB), by (job, name, version, chunk).

A write stores every chunk of a new version first, then the row that names it, then, when it replaced a file,
deletes the chunks of the older versions (a lightweight delete, best effort: what it leaves is never read, and the
next rewrite or the job's deletion takes it). A reader takes the row, then
that version's chunks one at a time: it never sees a mix of two versions, and never holds more than one chunk of
a file in memory; a download still running when its version is replaced may find the rest gone, and ends with
an error rather than with other bytes. A version is the upload's time in milliseconds above 22 random bits,
increasing within a process: two replicas writing one name in the same millisecond share a version once in 4
million such pairs. Deleting a job deletes both
tables' rows of it (``jobs.DATA_TABLES``).
"""

from __future__ import annotations

import logging
import secrets
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from ..errors import StoreUnavailable
from .engine import Engine
from .identity import now_ms

log = logging.getLogger("jobpulse.store")

CHUNK_BYTES = 1 << 20
HEAD_BYTES = 16
_RANDOM_BITS = 22
_MS = pa.timestamp("ms", tz="UTC")
_FILE_ROW = pa.schema(
    [
        ("job", pa.string()),
        ("name", pa.string()),
        ("version", pa.uint64()),
        ("size", pa.uint64()),
        ("chunks", pa.uint32()),
        ("head", pa.binary()),
        ("uploaded", _MS),
        ("deleted", pa.uint8()),
    ]
)
_CHUNK_ROW = pa.schema(
    [
        ("job", pa.string()),
        ("name", pa.string()),
        ("version", pa.uint64()),
        ("chunk", pa.uint32()),
        ("data", pa.binary()),
    ]
)
# Bytes come back as bytes, not as text (a String column is answered as UTF-8 text by default).
_AS_BYTES = "SETTINGS output_format_arrow_string_as_string = 0"


@dataclass(frozen=True)
class StoredFile:
    """One version of a file: its size in bytes, how many chunks hold it, and its first bytes."""

    job: str
    name: str
    version: int
    size: int
    chunks: int
    head: bytes
    uploaded: int  # epoch milliseconds


class Files:
    def __init__(self, engine: Engine, db: str) -> None:
        self._engine = engine
        self._db = db
        self._lock = threading.Lock()
        self._last_version = 0

    def write(self, job: str, name: str, data: bytes) -> StoredFile:
        """Store ``data`` as the newest version of file ``name`` of ``job``, replacing any before it."""
        replaces = self.get(job, name) is not None
        version = self._next_version()
        count = max(1, -(-len(data) // CHUNK_BYTES))
        for number in range(count):  # a chunk per insert: beyond the upload itself, one chunk is held at a time
            piece = data[number * CHUNK_BYTES : (number + 1) * CHUNK_BYTES]
            row = {"job": job, "name": name, "version": version, "chunk": number, "data": piece}
            self._engine.insert(f"{self._db}.file_chunks", pa.Table.from_pylist([row], schema=_CHUNK_ROW))
        stored = StoredFile(job, name, version, len(data), count, data[:HEAD_BYTES], now_ms())
        self._write_row(stored, deleted=False)
        if replaces:  # a delete is a mutation of the table: none for a new name, the common upload
            self._forget_older(job, name, version)
        return stored

    def get(self, job: str, name: str) -> StoredFile | None:
        """The newest version of file ``name`` of ``job``; None when there is none or it was deleted."""
        rows = self._rows("name = {name:String}", {"job": job, "name": name})
        return rows[0] if rows else None

    def chunks(self, stored: StoredFile) -> Iterator[bytes]:
        """The bytes of ``stored``, one chunk at a time, each read when the one before it has been taken."""
        for number in range(stored.chunks):
            table = self._engine.query(
                f"""SELECT data FROM {self._db}.file_chunks WHERE job = {{job:String}} AND name = {{name:String}}
                    AND version = {{version:UInt64}} AND chunk = {{chunk:UInt32}} LIMIT 1 {_AS_BYTES}""",
                {"job": stored.job, "name": stored.name, "version": stored.version, "chunk": number},
            )
            if table.num_rows == 0:
                raise StoreUnavailable(f"chunk {number} of file {stored.name!r} of job {stored.job!r} is missing")
            yield table.column("data")[0].as_py()

    def delete(self, job: str, name: str) -> bool:
        """Delete file ``name`` of ``job``; False when there was none."""
        found = self.get(job, name)
        if found is None:
            return False
        version = self._next_version()
        self._write_row(StoredFile(job, name, version, 0, 0, b"", now_ms()), deleted=True)
        self._forget_older(job, name, version)
        return True

    def listing(self, job: str) -> list[StoredFile]:
        """Every file of ``job`` (its newest version), by name."""
        return self._rows("1", {"job": job})

    def _rows(self, where: str, params: dict[str, Any]) -> list[StoredFile]:
        rows = self._engine.query(
            f"""SELECT job, name, version, size, chunks, head, toUnixTimestamp64Milli(uploaded) AS uploaded
                FROM {self._db}.files FINAL WHERE job = {{job:String}} AND {where} AND deleted = 0
                ORDER BY name {_AS_BYTES}""",
            params,
        ).to_pylist()
        return [StoredFile(**{**row, "job": row["job"].decode(), "name": row["name"].decode()}) for row in rows]

    def _write_row(self, stored: StoredFile, *, deleted: bool) -> None:
        row = {
            "job": stored.job,
            "name": stored.name,
            "version": stored.version,
            "size": stored.size,
            "chunks": stored.chunks,
            "head": stored.head,
            "uploaded": stored.uploaded,
            "deleted": int(deleted),
        }
        self._engine.insert(f"{self._db}.files", pa.Table.from_pylist([row], schema=_FILE_ROW))

    def _forget_older(self, job: str, name: str, version: int) -> None:
        """Delete the chunks of the versions before ``version``; a failure leaves them unread, so it is let pass."""
        try:
            self._engine.command(
                f"""DELETE FROM {self._db}.file_chunks WHERE job = {{job:String}} AND name = {{name:String}}
                    AND version < {{version:UInt64}}""",
                {"job": job, "name": name, "version": version},
            )
        except StoreUnavailable as exc:
            log.warning("older chunks of file %r of job %r were not deleted: %s", name, job, exc)

    def _next_version(self) -> int:
        candidate = (now_ms() << _RANDOM_BITS) | secrets.randbits(_RANDOM_BITS)
        with self._lock:
            self._last_version = max(candidate, self._last_version + 1)
            return self._last_version
