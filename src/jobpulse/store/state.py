"""Small named values shared by every replica of the server (the signing secret, login tokens)."""

from __future__ import annotations

import secrets
import time

from .columns import rows_to_arrow
from .engine import Engine


class ServerState:
    def __init__(self, engine: Engine, db: str) -> None:
        self._engine = engine
        self._db = db

    def get(self, name: str) -> str | None:
        rows = self._engine.query(
            f"SELECT value FROM {self._db}.server_state FINAL WHERE name = {{name:String}}", {"name": name}
        ).to_pylist()
        return rows[0]["value"] if rows else None

    def set(self, name: str, value: str) -> None:
        row = {"name": name, "value": value, "version": time.time_ns()}
        self._engine.insert(f"{self._db}.server_state", rows_to_arrow("server_state", [row]))

    def secret(self) -> bytes:
        """The key that signs cursors and sessions, made on first use and the same for every replica."""
        value = self.get("signing_secret")
        if value is None:
            self.set("signing_secret", secrets.token_hex(32))
            # Two replicas starting at once may both write: the newest version wins for both.
            value = self.get("signing_secret")
        assert value is not None
        return bytes.fromhex(value)

    def with_prefix(self, prefix: str) -> dict[str, str]:
        """Every value whose name starts with ``prefix``, by name."""
        rows = self._engine.query(
            f"SELECT name, value FROM {self._db}.server_state FINAL WHERE startsWith(name, {{prefix:String}})",
            {"prefix": prefix},
        ).to_pylist()
        return {row["name"]: row["value"] for row in rows}
