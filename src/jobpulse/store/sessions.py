"""Web UI sessions: each sign-in gets a random id, of which only a hash is stored, like an API key's secret.

A session belongs to one API key and acts with its rights. It ends when its user logs out, when its key is
revoked (``Keys.revoke``), or when it expires; an ended session is refused by every replica, since they all
read the same table. Rows go a day after their session expires (the table's TTL).
"""

from __future__ import annotations

import hashlib
import secrets
import threading
import time
from dataclasses import dataclass, replace
from typing import Any

import pyarrow as pa

from .engine import Engine
from .identity import now_ms

_MS = pa.timestamp("ms", tz="UTC")
_ROW = pa.schema(
    [
        ("session_hash", pa.string()),
        ("key_id", pa.string()),
        ("created", _MS),
        ("expires", _MS),
        ("ended", _MS),
        ("version", pa.uint64()),
    ]
)
# Session ids are 43 URL-safe characters; anything much longer is not one of ours and is never hashed.
_MAX_ID_LENGTH = 128


@dataclass(frozen=True)
class Session:
    """One sign-in: the key it acts as, and when it was opened, expires and ended (epoch milliseconds)."""

    key_id: str
    created: int
    expires: int
    ended: int | None = None

    def live(self, at_ms: int) -> bool:
        return self.ended is None and self.expires > at_ms


def _hash(session_id: str) -> str:
    return hashlib.sha256(session_id.encode()).hexdigest()


class Sessions:
    def __init__(self, engine: Engine, db: str) -> None:
        self._engine = engine
        self._db = db
        self._endings = 0
        self._lock = threading.Lock()

    @property
    def endings(self) -> int:
        """How many times sessions were ended through this object: a memory of sessions looked up earlier holds
        only while this count is unchanged (where every write passes through this object)."""
        return self._endings

    def open(self, key_id: str, lifetime_s: int) -> tuple[str, Session]:
        """A new session of ``key_id`` for ``lifetime_s`` seconds; answers its id (shown once, never stored)."""
        session_id = secrets.token_urlsafe(32)
        created = now_ms()
        session = Session(key_id=key_id, created=created, expires=created + lifetime_s * 1000)
        self._write([(_hash(session_id), session)])
        return session_id, session

    def get(self, session_id: str) -> Session | None:
        """The session ``session_id`` while it lasts; None once it has ended or expired, or if it never was."""
        if not session_id or len(session_id) > _MAX_ID_LENGTH:
            return None
        rows = self._rows("session_hash = {hash:String}", {"hash": _hash(session_id)})
        if not rows:
            return None
        session = _session(rows[0])
        return session if session.live(now_ms()) else None

    def end(self, session_id: str) -> bool:
        """End ``session_id`` now; False when it had already ended or expired."""
        session = self.get(session_id)
        if session is None:
            return False
        self._write([(_hash(session_id), replace(session, ended=now_ms()))])
        self._ended()
        return True

    def end_for_key(self, key_id: str) -> int:
        """End every live session of ``key_id`` now; answers how many there were."""
        rows = self._rows(
            "key_id = {key:String} AND ended IS NULL AND expires > fromUnixTimestamp64Milli({now:Int64})",
            {"key": key_id, "now": now_ms()},
        )
        if rows:
            ended = now_ms()
            self._write([(row["session_hash"], replace(_session(row), ended=ended)) for row in rows])
        self._ended()  # also when none was live: a replica's memory of this key's sessions must go
        return len(rows)

    def _ended(self) -> None:
        with self._lock:
            self._endings += 1

    def _rows(self, where: str, params: dict[str, Any]) -> list[dict[str, Any]]:
        return self._engine.query(
            f"""SELECT session_hash, key_id, toUnixTimestamp64Milli(created) AS created,
                toUnixTimestamp64Milli(expires) AS expires, toUnixTimestamp64Milli(ended) AS ended
                FROM {self._db}.sessions FINAL WHERE {where}""",
            params,
        ).to_pylist()

    def _write(self, sessions: list[tuple[str, Session]]) -> None:
        version = time.time_ns()
        rows = [
            {
                "session_hash": session_hash,
                "key_id": s.key_id,
                "created": s.created,
                "expires": s.expires,
                "ended": s.ended,
                "version": version,
            }
            for session_hash, s in sessions
        ]
        self._engine.insert(f"{self._db}.sessions", pa.Table.from_pylist(rows, schema=_ROW))


def _session(row: dict[str, Any]) -> Session:
    return Session(key_id=row["key_id"], created=row["created"], expires=row["expires"], ended=row["ended"])
