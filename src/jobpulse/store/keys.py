"""API keys: only a hash of each secret is stored; a key names its projects and its role."""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from dataclasses import asdict, dataclass
from typing import Any

from ..errors import BadRequest, NotFound
from .columns import rows_to_arrow
from .engine import Engine
from .jobs import check_project, now_ms

ROLES = ("read", "write", "admin")
ALL_PROJECTS = "*"
PREFIX = "jp_"


@dataclass
class ApiKey:
    key_id: str
    name: str
    projects: list[str]
    role: str
    created: int
    revoked: int | None = None

    def allows_project(self, project: str) -> bool:
        return ALL_PROJECTS in self.projects or project in self.projects

    def visible_projects(self) -> list[str] | None:
        """The projects this key sees; None when it sees all."""
        return None if ALL_PROJECTS in self.projects else list(self.projects)

    def can(self, role: str) -> bool:
        return ROLES.index(self.role) >= ROLES.index(role)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _hash(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def split_token(token: str) -> tuple[str, str] | None:
    """A key reads ``jp_<key_id>_<secret>``; answers (key_id, token) or None when malformed."""
    if not token.startswith(PREFIX):
        return None
    rest = token[len(PREFIX) :]
    key_id, sep, secret = rest.partition("_")
    if not sep or len(key_id) != 12 or len(secret) < 20:
        return None
    return key_id, token


class Keys:
    def __init__(self, engine: Engine, db: str) -> None:
        self._engine = engine
        self._db = db

    def create(self, name: str, projects: list[str], role: str) -> tuple[ApiKey, str]:
        """A new key; answers it and its token, which is shown once and never stored."""
        if role not in ROLES:
            raise BadRequest(f"'role' must be one of {', '.join(ROLES)}", field="role")
        if not projects:
            raise BadRequest("a key needs at least one project, or '*' for all", field="projects")
        for project in projects:
            if project != ALL_PROJECTS:
                check_project(project, "projects")
        key_id = secrets.token_hex(6)
        token = f"{PREFIX}{key_id}_{secrets.token_urlsafe(32)}"
        key = ApiKey(key_id=key_id, name=name, projects=list(projects), role=role, created=now_ms())
        self._write(key, _hash(token))
        return key, token

    def verify(self, token: str) -> ApiKey | None:
        """The live key of ``token``, or None when it is unknown, wrong or revoked."""
        parts = split_token(token)
        if parts is None:
            return None
        rows = self._rows([parts[0]])
        if not rows:
            return None
        row = rows[0]
        if row["revoked"] is not None or not hmac.compare_digest(row.pop("secret_hash"), _hash(token)):
            return None
        return ApiKey(**row)

    def get(self, key_id: str) -> ApiKey | None:
        """The key ``key_id`` if it exists and is not revoked."""
        rows = self._rows([key_id])
        if not rows or rows[0]["revoked"] is not None:
            return None
        rows[0].pop("secret_hash")
        return ApiKey(**rows[0])

    def list(self) -> list[ApiKey]:
        rows = self._rows(None)
        for row in rows:
            row.pop("secret_hash")
        return [ApiKey(**row) for row in rows]

    def revoke(self, key_id: str) -> ApiKey:
        rows = self._rows([key_id])
        if not rows:
            raise NotFound(f"API key {key_id!r} does not exist")
        row = rows[0]
        secret_hash = row.pop("secret_hash")
        key = ApiKey(**row)
        if key.revoked is None:
            key.revoked = now_ms()
            self._write(key, secret_hash)
        return key

    def _rows(self, key_ids: list[str] | None) -> list[dict[str, Any]]:
        where, params = "1", {}
        if key_ids is not None:
            where, params = "key_id IN {ids:Array(String)}", {"ids": key_ids}
        return self._engine.query(
            f"""SELECT key_id, secret_hash, name, projects, role, toUnixTimestamp64Milli(created) AS created,
                toUnixTimestamp64Milli(revoked) AS revoked FROM {self._db}.api_keys FINAL WHERE {where}
                ORDER BY created""",
            params,
        ).to_pylist()

    def _write(self, key: ApiKey, secret_hash: str) -> None:
        row = key.to_dict()
        row.update(secret_hash=secret_hash, version=time.time_ns())
        self._engine.insert(f"{self._db}.api_keys", rows_to_arrow("api_keys", [row]))
