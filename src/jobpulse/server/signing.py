"""Signed, self-contained tokens (cursors, sessions, login links): any replica with the shared
secret can read them, so the server keeps no per-client state."""

from __future__ import annotations

import base64
import hashlib
import hmac
import time
from typing import Any

import orjson

from ..errors import BadRequest


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


class Signer:
    def __init__(self, secret: bytes) -> None:
        self._secret = secret

    def sign(self, purpose: str, payload: dict[str, Any], ttl_s: int | None = None) -> str:
        body = dict(payload, _p=purpose)
        if ttl_s is not None:
            body["_e"] = int(time.time()) + ttl_s
        data = _b64(orjson.dumps(body))
        mac = hmac.new(self._secret, data.encode(), hashlib.sha256).digest()[:18]
        return f"{data}.{_b64(mac)}"

    def verify(self, purpose: str, token: str, field: str = "cursor") -> dict[str, Any]:
        """The payload of ``token``; BadRequest naming ``field`` when it is forged, expired or for another use."""
        try:
            data, mac = token.split(".", 1)
            expected = hmac.new(self._secret, data.encode(), hashlib.sha256).digest()[:18]
            if not hmac.compare_digest(expected, _unb64(mac)):
                raise ValueError("signature")
            body = orjson.loads(_unb64(data))
        except (ValueError, orjson.JSONDecodeError) as exc:
            raise BadRequest(f"'{field}' is not a valid token", field=field) from exc
        if body.pop("_p", None) != purpose:
            raise BadRequest(f"'{field}' is a token for another use", field=field)
        expires = body.pop("_e", None)
        if expires is not None and expires < time.time():
            raise BadRequest(f"'{field}' has expired", field=field)
        return body
