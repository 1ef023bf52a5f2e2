"""Signed requests of the vendors' SDKs, checked as the SDKs sign them.

- ``acs``: Alibaba Cloud's ``ACS3-HMAC-SHA256`` and the older ROA signature (``acs <AK>:<signature>``, HMAC-SHA1),
  as ``alibabacloud_tea_openapi`` computes them;
- ``sdk_hmac``: Huawei Cloud's ``SDK-HMAC-SHA256``, as ``huaweicloudsdkcore`` computes it.

Each scheme rebuilds the string its SDK signed from the request as received (``SignedRequest``), takes the
access key pair's secret from ``KeyPairs``, and compares signatures in constant time. A refused request raises
``SignatureRefused`` with a ``Reason``, which each API family answers with its vendor's error code.
"""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass
from urllib.parse import parse_qsl

from starlette.requests import Request

from ..key_pairs import Reason, SignatureRefused

__all__ = ["WINDOW_MS", "Reason", "SignatureRefused", "SignedRequest", "check_window", "same"]

WINDOW_MS = 15 * 60_000  # a signed request's date may be this far from the server's clock, either way
MAX_NONCE_LENGTH = 128


@dataclass(frozen=True)
class SignedRequest:
    """What a signature covers, as the server received it."""

    method: str
    raw_path: str  # the path as sent: percent-encoded, without the query
    query: list[tuple[str, str]]  # decoded (name, value) pairs in the order sent
    headers: dict[str, list[str]]  # lower-case name -> its values
    body: bytes = b""

    @classmethod
    def of(cls, request: Request, body: bytes = b"") -> SignedRequest:
        raw = request.scope.get("raw_path") or request.url.path.encode()
        path = raw.decode("latin-1").split("?", 1)[0]
        query = parse_qsl(request.scope.get("query_string", b"").decode("latin-1"), keep_blank_values=True)
        headers: dict[str, list[str]] = {}
        for name, value in request.headers.items():
            headers.setdefault(name.lower(), []).append(_text(value))
        return cls(request.method.upper(), path, query, headers, body)

    def header(self, name: str) -> str | None:
        """The value of header ``name`` (several values joined by commas), or None."""
        values = self.headers.get(name.lower())
        return None if values is None else ",".join(values)

    def body_sha256(self) -> str:
        return hashlib.sha256(self.body).hexdigest()


def _text(value: str) -> str:
    """A header value as its sender wrote it: HTTP carries bytes, which the server read as Latin-1; an SDK that
    sends UTF-8 signed the UTF-8 text."""
    try:
        return value.encode("latin-1").decode("utf-8")
    except (UnicodeEncodeError, UnicodeDecodeError):
        return value


def check_window(moment_ms: int, now_ms: int, name: str) -> None:
    """Refuse a request dated more than ``WINDOW_MS`` away from now."""
    if abs(moment_ms - now_ms) > WINDOW_MS:
        raise SignatureRefused(
            Reason.EXPIRED,
            f"the request's {name} is more than {WINDOW_MS // 60_000} minutes from the server's time; "
            "check the client's clock",
        )


def check_nonce(nonce: str | None, name: str) -> str:
    if not nonce or len(nonce) > MAX_NONCE_LENGTH:
        raise SignatureRefused(Reason.MALFORMED, f"the {name} header must be 1-{MAX_NONCE_LENGTH} characters")
    return nonce


def same(expected: str, given: str) -> None:
    """Refuse unless the two signatures are equal (compared in constant time)."""
    if not hmac.compare_digest(expected.encode(), given.encode()):
        raise SignatureRefused(
            Reason.MISMATCH,
            "the request's signature does not match the one the access key's secret makes; check the secret",
        )


def authorization_fields(
    authorization: str, algorithm: str, names: tuple[str, str, str], served: str
) -> tuple[str, list[str], str]:
    """The credential, signed headers and signature named ``names`` in an ``Authorization`` header of
    ``algorithm`` (``ALGO Name=value, Name=value, ...``). Raises :class:`SignatureRefused` for another algorithm
    (``served`` says which are) or when one of the three is missing or empty."""
    given, _, rest = authorization.partition(" ")
    if given != algorithm:
        raise SignatureRefused(Reason.MALFORMED, f"the signature algorithm {given!r} is not served: sign with {served}")
    fields = {}
    for part in rest.split(","):
        name, _, value = part.strip().partition("=")
        fields[name] = value.strip()
    credential, signed, signature = (fields.get(name, "") for name in names)
    if not credential or not signed or not signature:
        form = ", ".join(f"{name}=.." for name in names)
        raise SignatureRefused(Reason.MALFORMED, f"the Authorization header must read '{algorithm} {form}'")
    return credential, signed.split(";"), signature
