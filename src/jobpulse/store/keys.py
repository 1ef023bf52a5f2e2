"""API keys: only a hash of each secret is stored; a key names its projects and its role.

A key is a *token* (``jp_<key_id>_<secret>``, sent as it is) or an *access key pair*: an access key id and a
secret that the vendors' SDKs sign requests with (HMAC). Verifying a signature needs the secret itself, so a
pair's secret is stored sealed (encrypted) by a ``Sealer`` holding the server's master key, with the
fingerprint of the master key that sealed it, in a table of its own (``key_pair_secrets``); revoking a pair
erases its sealed secret. A pair's key id starts with ``JPAK`` (a token's is 12 hex digits).
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from dataclasses import asdict, dataclass
from typing import Any, Protocol

import pyarrow as pa

from ..errors import BadRequest, NotFound
from .columns import rows_to_arrow
from .engine import Engine
from .identity import check_project, now_ms
from .sessions import Sessions

ROLES = ("read", "write", "admin")
ALL_PROJECTS = "*"
PREFIX = "jp_"
TOKEN, PAIR = "token", "pair"
PAIR_PREFIX = "JPAK"
_ALPHANUMERIC = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
_SEALED_ROW = pa.schema(
    [("key_id", pa.string()), ("sealed_secret", pa.string()), ("master_key", pa.string()), ("version", pa.uint64())]
)


@dataclass
class ApiKey:
    key_id: str
    name: str
    projects: list[str]
    role: str
    created: int
    revoked: int | None = None
    kind: str = TOKEN  # TOKEN or PAIR

    def allows_project(self, project: str) -> bool:
        return ALL_PROJECTS in self.projects or project in self.projects

    def visible_projects(self) -> list[str] | None:
        """The projects this key sees; None when it sees all."""
        return None if ALL_PROJECTS in self.projects else list(self.projects)

    def can(self, role: str) -> bool:
        return ROLES.index(self.role) >= ROLES.index(role)

    def manages(self, other: ApiKey) -> bool:
        """Whether this key sees every project ``other`` sees: an admin lists and revokes only such keys, so an
        admin of one project can neither see nor revoke a key of another project or of all projects."""
        if ALL_PROJECTS in self.projects:
            return True
        return ALL_PROJECTS not in other.projects and all(p in self.projects for p in other.projects)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class SealedPair:
    """An access key pair as stored: its key, its sealed secret ("" once revoked) and the fingerprint of the
    master key that sealed it."""

    key: ApiKey
    sealed_secret: str
    master_key: str


class Sealer(Protocol):
    """Encrypts a pair's secret for storage (``server/master_key.py``)."""

    def seal(self, secret: str, key_id: str) -> tuple[str, str]:
        """(the sealed secret, the fingerprint of the master key that sealed it)"""
        ...


def _hash(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def _random(length: int, alphabet: str = _ALPHANUMERIC) -> str:
    return "".join(secrets.choice(alphabet) for _ in range(length))


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
    def __init__(self, engine: Engine, db: str, sessions: Sessions) -> None:
        self._engine = engine
        self._db = db
        self._sessions = sessions

    def create(self, name: str, projects: list[str], role: str) -> tuple[ApiKey, str]:
        """A new key; answers it and its token, which is shown once and never stored."""
        _check_grant(projects, role)
        key_id = secrets.token_hex(6)
        token = f"{PREFIX}{key_id}_{secrets.token_urlsafe(32)}"
        key = ApiKey(key_id=key_id, name=name, projects=list(projects), role=role, created=now_ms())
        self._write(key, _hash(token))
        return key, token

    def create_pair(self, name: str, projects: list[str], role: str, sealer: Sealer) -> tuple[ApiKey, str]:
        """A new access key pair; answers its key (``key_id`` is the access key id) and its secret, which is
        shown once and stored only sealed by ``sealer``."""
        _check_grant(projects, role)
        key_id = PAIR_PREFIX + _random(16, _ALPHANUMERIC[:26] + _ALPHANUMERIC[52:])
        secret = _random(40)
        key = ApiKey(key_id=key_id, name=name, projects=list(projects), role=role, created=now_ms(), kind=PAIR)
        sealed, master_key = sealer.seal(secret, key_id)
        self._write_sealed(key_id, sealed, master_key, time.time_ns())
        self._write(key, "")
        return key, secret

    def pair(self, key_id: str) -> SealedPair | None:
        """The access key pair ``key_id`` as stored, revoked or not; None when there is no such pair."""
        rows = self._rows([key_id]) if key_id.startswith(PAIR_PREFIX) else []
        if not rows:
            return None
        sealed = self._sealed([key_id]).get(key_id, {})
        return SealedPair(_key(rows[0]), sealed.get("sealed_secret", ""), sealed.get("master_key", ""))

    def pairs(self) -> list[SealedPair]:
        """Every live access key pair with its sealed secret (for a change of master key)."""
        keys = [_key(row) for row in self._rows(None) if row["key_id"].startswith(PAIR_PREFIX)]
        live = [key for key in keys if key.revoked is None]
        sealed = self._sealed([key.key_id for key in live])
        return [
            SealedPair(key, sealed[key.key_id]["sealed_secret"], sealed[key.key_id]["master_key"])
            for key in live
            if key.key_id in sealed
        ]

    def reseal(self, key_id: str, sealed: str, master_key: str) -> bool:
        """Store the pair's secret sealed anew; False when the pair is gone or revoked meanwhile. The row takes
        the version after the one read, so that a revocation written meanwhile (a later version) still wins."""
        rows = self._rows([key_id])
        found = self._sealed([key_id]).get(key_id)
        if not rows or rows[0]["revoked"] is not None or found is None or not found["sealed_secret"]:
            return False
        self._write_sealed(key_id, sealed, master_key, found["version"] + 1)
        return True

    def verify(self, token: str) -> ApiKey | None:
        """The live key of ``token``, or None when it is unknown, wrong or revoked."""
        parts = split_token(token)
        if parts is None:
            return None
        rows = self._rows([parts[0]])
        if not rows:
            return None
        row = rows[0]
        if row["revoked"] is not None or not hmac.compare_digest(row["secret_hash"], _hash(token)):
            return None
        return _key(row)

    def get(self, key_id: str) -> ApiKey | None:
        """The key ``key_id`` if it exists and is not revoked."""
        rows = self._rows([key_id])
        if not rows or rows[0]["revoked"] is not None:
            return None
        return _key(rows[0])

    def list(self) -> list[ApiKey]:
        return [_key(row) for row in self._rows(None)]

    def find(self, key_id: str) -> ApiKey | None:
        """The key ``key_id``, revoked or not; None if it never existed."""
        rows = self._rows([key_id])
        return _key(rows[0]) if rows else None

    def revoke(self, key_id: str) -> ApiKey:
        """Revoke ``key_id`` and end every UI session opened with it."""
        rows = self._rows([key_id])
        if not rows:
            raise NotFound(f"API key {key_id!r} does not exist")
        row = rows[0]
        key = _key(row)
        if key.revoked is None:
            key.revoked = now_ms()
            self._write(key, row["secret_hash"])
            if key.kind == PAIR:  # a revoked pair's secret is never needed again: it is erased, not kept sealed
                self._write_sealed(key_id, "", "", time.time_ns())
        self._sessions.end_for_key(key_id)
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
        del row["kind"]
        row.update(secret_hash=secret_hash, version=time.time_ns())
        self._engine.insert(f"{self._db}.api_keys", rows_to_arrow("api_keys", [row]))

    def _sealed(self, key_ids: list[str]) -> dict[str, dict[str, Any]]:
        """The sealed secrets of ``key_ids`` by key id (with the master key's fingerprint and the row's version)."""
        if not key_ids:
            return {}
        rows = self._engine.query(
            f"SELECT key_id, sealed_secret, master_key, version FROM {self._db}.key_pair_secrets FINAL "
            "WHERE key_id IN {ids:Array(String)}",
            {"ids": key_ids},
        ).to_pylist()
        return {row["key_id"]: row for row in rows}

    def _write_sealed(self, key_id: str, sealed: str, master_key: str, version: int) -> None:
        row = {"key_id": key_id, "sealed_secret": sealed, "master_key": master_key, "version": version}
        self._engine.insert(f"{self._db}.key_pair_secrets", pa.Table.from_pylist([row], schema=_SEALED_ROW))


def _check_grant(projects: list[str], role: str) -> None:
    if role not in ROLES:
        raise BadRequest(f"'role' must be one of {', '.join(ROLES)}", field="role")
    if not projects:
        raise BadRequest("a key needs at least one project, or '*' for all", field="projects")
    for project in projects:
        if project != ALL_PROJECTS:
            check_project(project, "projects")


def _key(row: dict[str, Any]) -> ApiKey:
    """The ``ApiKey`` of a stored row (its secret's hash and sealed form left out)."""
    return ApiKey(
        key_id=row["key_id"],
        name=row["name"],
        projects=list(row["projects"]),
        role=row["role"],
        created=row["created"],
        revoked=row["revoked"],
        kind=PAIR if row["key_id"].startswith(PAIR_PREFIX) else TOKEN,
    )
