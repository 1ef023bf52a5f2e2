"""The server's master key: it seals (AES-256-GCM) the secrets of access key pairs before they are stored.

The key lives in a file, by default ``<data_dir>/master.key``, created with mode 0600 on first start (setting
``master_key_file`` names another path: every replica of a cluster must read the same key). The file holds one
key per line, 64 hexadecimal digits; blank lines and lines starting with ``#`` are ignored. The first key seals;
every key in the file opens. Each sealed secret is stored with the fingerprint of the key that sealed it, so a
server that meets a fingerprint it does not hold reads the file again (another process may have rotated it).

A sealed secret reads ``v1.<base64url(nonce + ciphertext + tag)>``; the pair's access key id is the associated
data, so a sealed secret copied onto another key's row does not open.

``rotate`` makes a new key and re-seals every stored secret with it (``jobpulse master-key rotate``).
"""

from __future__ import annotations

import base64
import hashlib
import logging
import os
import secrets
import stat
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from ..store import Store

log = logging.getLogger("jobpulse.server")

KEY_BYTES = 32
_VERSION = "v1."
_NONCE_BYTES = 12
_RELOAD_EVERY_S = 1.0


class MasterKeyError(ValueError):
    """The master key file is missing, unreadable or malformed, or a secret cannot be opened with it."""


def fingerprint(key: bytes) -> str:
    """A short public name of a master key: it tells which key sealed a secret, and reveals nothing of it."""
    return hashlib.sha256(b"jobpulse master key\0" + key).hexdigest()[:16]


def read_keys(path: Path) -> list[bytes]:
    """The keys of the file at ``path``, the sealing one first."""
    try:
        text = path.read_text(encoding="ascii")
    except (OSError, UnicodeDecodeError) as exc:
        raise MasterKeyError(f"cannot read the master key file {path}: {exc}") from exc
    keys = []
    for number, line in enumerate(text.splitlines(), start=1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        try:
            key = bytes.fromhex(line)
        except ValueError:
            key = b""
        if len(key) != KEY_BYTES:
            raise MasterKeyError(f"{path}, line {number}: a master key is {2 * KEY_BYTES} hexadecimal digits")
        keys.append(key)
    if not keys:
        raise MasterKeyError(f"the master key file {path} holds no key")
    mode = path.stat().st_mode
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        log.warning("the master key file %s can be read by others (mode %o); chmod 600 it", path, mode & 0o777)
    return keys


def write_keys(path: Path, keys: list[bytes]) -> None:
    """Replace the file at ``path`` with ``keys`` (the sealing one first), readable by its owner only."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(4)}")
    lines = ["# jobpulse master key: seals the secrets of access key pairs; the first key seals, all open"]
    lines += [key.hex() for key in keys]
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "w", encoding="ascii") as out:
            out.write("\n".join(lines) + "\n")
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def ensure_key_file(path: Path) -> bool:
    """Create the master key file at ``path`` with a new key unless it exists; True when it was created."""
    if path.exists():
        read_keys(path)  # a malformed file is refused at start, not at the first signed request
        return False
    write_keys(path, [secrets.token_bytes(KEY_BYTES)])
    return True


class Keyring:
    """The master keys of one server process: seals with the first, opens with any it holds."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        self._keys: dict[str, bytes] = {}
        self._sealing: bytes | None = None
        self._read_at = 0.0

    @classmethod
    def load(cls, path: Path, *, create: bool = True) -> Keyring:
        """The keyring of the file at ``path``, made first when ``create`` and there is none."""
        if create:
            ensure_key_file(Path(path))
        ring = cls(path)
        ring._read()
        return ring

    @property
    def fingerprint(self) -> str:
        """The fingerprint of the sealing key."""
        assert self._sealing is not None
        return fingerprint(self._sealing)

    def fingerprints(self) -> list[str]:
        with self._lock:
            return list(self._keys)

    def _read(self) -> None:
        keys = read_keys(self.path)
        with self._lock:
            for key in keys:
                self._keys[fingerprint(key)] = key
            self._sealing = keys[0]
            self._read_at = time.monotonic()

    def seal(self, secret: str, key_id: str) -> tuple[str, str]:
        """``secret`` sealed for the row of ``key_id``, and the fingerprint of the key that sealed it. The file
        is read again first when it was last read a while ago: a rotation may have put a new key first."""
        if time.monotonic() - self._read_at >= _RELOAD_EVERY_S:
            self._read()
        assert self._sealing is not None
        nonce = secrets.token_bytes(_NONCE_BYTES)
        sealed = AESGCM(self._sealing).encrypt(nonce, secret.encode(), key_id.encode())
        return _VERSION + base64.urlsafe_b64encode(nonce + sealed).decode(), fingerprint(self._sealing)

    def open(self, sealed: str, key_id: str, master_key: str) -> str:
        """The secret of ``sealed``, stored for ``key_id`` with the fingerprint ``master_key``."""
        key = self._key(master_key)
        if not sealed.startswith(_VERSION):
            raise MasterKeyError(f"the secret of access key {key_id} is not in a form this server reads")
        try:
            raw = base64.urlsafe_b64decode(sealed[len(_VERSION) :])
            plain = AESGCM(key).decrypt(raw[:_NONCE_BYTES], raw[_NONCE_BYTES:], key_id.encode())
        except (InvalidTag, ValueError) as exc:
            raise MasterKeyError(f"the sealed secret of access key {key_id} does not open with its master key") from exc
        return plain.decode()

    def _key(self, master_key: str) -> bytes:
        with self._lock:
            key = self._keys.get(master_key)
            stale = time.monotonic() - self._read_at >= _RELOAD_EVERY_S
        if key is None and stale:
            self._read()  # the file may have been rotated since this process read it
            with self._lock:
                key = self._keys.get(master_key)
        if key is None:
            raise MasterKeyError(
                f"access key pairs sealed with master key {master_key} cannot be opened: {self.path} does not hold "
                f"that key (it holds {', '.join(self.fingerprints())}); every replica must read the same key file"
            )
        return key


@dataclass
class Rotation:
    resealed: int
    new: str
    retired: list[str]


def rotate(store: Store, path: Path, *, keep_old: bool = False) -> Rotation:
    """Make a new master key, re-seal every live pair's secret with it, then drop the old keys from the file
    (unless ``keep_old``). The file holds the new key and the old ones while secrets are re-sealed, so a server
    reading it meanwhile opens both; a failure leaves both in the file."""
    ring = Keyring.load(path, create=False)
    old = read_keys(ring.path)
    new = secrets.token_bytes(KEY_BYTES)
    write_keys(ring.path, [new, *old])
    ring = Keyring.load(ring.path, create=False)
    resealed = 0
    for _ in range(3):  # again for pairs that a running server sealed with an old key meanwhile
        pending = [pair for pair in store.keys.pairs() if pair.master_key != ring.fingerprint]
        if not pending:
            break
        for pair in pending:
            secret = ring.open(pair.sealed_secret, pair.key.key_id, pair.master_key)
            sealed, master_key = ring.seal(secret, pair.key.key_id)
            resealed += store.keys.reseal(pair.key.key_id, sealed, master_key)
    if not keep_old:
        write_keys(ring.path, [new])
    return Rotation(resealed=resealed, new=fingerprint(new), retired=[fingerprint(k) for k in old])
