"""Nonces of signed requests: a request signed with an access key pair carries a nonce that no other request
of that key may show again while the request's date is still accepted, or a captured request could be replayed.

Every replica reads the same table, so a replay is refused whichever replica it reaches. ``claim`` inserts its own
claim (a random token, timed by the store's clock when it is inserted) kept once per key and nonce (``once.py``: of
two requests with one nonce arriving at once on two replicas, the engine stores one claim), then reads the claims of
the nonce; the earliest claim (by that time, then token) wins, so a replay arriving later, whenever, finds the
first request's claim.
"""

from __future__ import annotations

import secrets

import pyarrow as pa

from .engine import Engine
from .once import kept_once

_ROW = pa.schema(
    [
        ("key_id", pa.string()),
        ("nonce", pa.string()),
        ("claim", pa.string()),
        ("expires", pa.timestamp("ms", tz="UTC")),
    ]
)


class Nonces:
    def __init__(self, engine: Engine, db: str) -> None:
        self._engine = engine
        self._db = db

    def claim(self, key_id: str, nonce: str, expires_ms: int) -> bool:
        """True when this is the first request of ``key_id`` to show ``nonce``; False for a replay. The nonce is
        remembered at least until ``expires_ms`` (epoch milliseconds), after which the request's date is refused
        anyway."""
        claim = secrets.token_hex(16)
        row = {
            "key_id": key_id,
            "nonce": nonce,
            "claim": claim,
            "expires": expires_ms,
        }
        self._engine.insert(
            f"{self._db}.signature_nonces",
            pa.Table.from_pylist([row], schema=_ROW),
            kept_once("signature-nonce", key_id, nonce),
        )
        first = self._engine.query(
            f"SELECT claim FROM {self._db}.signature_nonces WHERE key_id = {{key:String}} AND nonce = {{nonce:String}} "
            "ORDER BY claimed, claim LIMIT 1",
            {"key": key_id, "nonce": nonce},
        ).to_pylist()
        return bool(first) and first[0]["claim"] == claim
