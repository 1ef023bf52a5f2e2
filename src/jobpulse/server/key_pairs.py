"""Access key pairs on the server: making them, and finding a pair's secret to check a request's signature.

A pair's secret is stored sealed with the server's master key (``master_key.py``); it is opened here, for one
request at a time, and never logged or answered. Revocation is read from the store on every request, so a
revoked pair is refused at once by every replica. The nonces of signed requests are claimed here too
(``store/nonces.py``).
"""

from __future__ import annotations

import enum
import logging
import threading
from pathlib import Path

from starlette.requests import Request

from ..errors import JobpulseError
from ..store import ApiKey, Store
from ..store.nonces import Nonces
from .master_key import Keyring, MasterKeyError

log = logging.getLogger("jobpulse.server")
_LOCK = threading.Lock()


class Reason(enum.Enum):
    """Why a signed request is refused; each API family answers each reason with its vendor's code."""

    MALFORMED = "malformed"  # the Authorization header or a header the scheme needs is missing or malformed
    UNKNOWN_KEY = "unknown key"  # no such access key pair
    REVOKED_KEY = "revoked key"
    EXPIRED = "expired"  # the request's date is outside the accepted window
    MISMATCH = "mismatch"  # the signature is not the one the pair's secret makes
    REPLAYED = "replayed"  # the nonce was shown by an earlier request


class SignatureRefused(Exception):
    def __init__(self, reason: Reason, message: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message


class KeyPairs:
    def __init__(self, store: Store, key_file: Path) -> None:
        self._store = store
        self._key_file = key_file
        self._ring: Keyring | None = None
        self._nonces = Nonces(store.engine, store.database)

    @property
    def keyring(self) -> Keyring:
        """The master keys, read (and the file made, on first use) when a pair is first made or checked."""
        if self._ring is None:
            with _LOCK:
                if self._ring is None:
                    try:
                        self._ring = Keyring.load(self._key_file)
                    except OSError as exc:
                        raise MasterKeyError(f"cannot make the master key file {self._key_file}: {exc}") from exc
        return self._ring

    def create(self, name: str, projects: list[str], role: str) -> tuple[ApiKey, str]:
        """A new pair: its key (``key_id`` is the access key id) and its secret, shown once."""
        try:
            return self._store.keys.create_pair(name, projects, role, self.keyring)
        except MasterKeyError as exc:
            log.error("cannot make an access key pair: %s", exc)
            raise JobpulseError("the server's master key cannot be read; see the server's log") from exc

    def secret(self, access_key_id: str) -> tuple[ApiKey, str]:
        """The live pair ``access_key_id`` and its secret; SignatureRefused when there is none."""
        pair = self._store.keys.pair(access_key_id)
        if pair is None:
            raise SignatureRefused(Reason.UNKNOWN_KEY, f"access key {access_key_id!r} does not exist")
        if pair.key.revoked is not None:
            raise SignatureRefused(Reason.REVOKED_KEY, f"access key {access_key_id!r} has been revoked")
        try:
            return pair.key, self.keyring.open(pair.sealed_secret, pair.key.key_id, pair.master_key)
        except MasterKeyError as exc:
            log.error("cannot check a request signed with access key %s: %s", access_key_id, exc)
            raise JobpulseError("the server cannot open the secret of this access key; see the server's log") from exc

    def claim_nonce(self, key: ApiKey, nonce: str, expires_ms: int) -> None:
        """Refuse ``nonce`` when an earlier request of ``key`` showed it."""
        if not self._nonces.claim(key.key_id, nonce, expires_ms):
            raise SignatureRefused(Reason.REPLAYED, f"the signature nonce {nonce!r} has been used already")


def key_pairs(request: Request) -> KeyPairs:
    """The app's ``KeyPairs``, made on first use from its store and settings."""
    state = request.app.state
    found = getattr(state, "key_pairs", None)
    if found is None:
        with _LOCK:
            found = getattr(state, "key_pairs", None)
            if found is None:
                ctx = state.ctx
                found = state.key_pairs = KeyPairs(ctx.store, ctx.settings.master_key_path)
    return found
