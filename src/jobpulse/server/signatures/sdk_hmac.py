"""Huawei Cloud's ``SDK-HMAC-SHA256`` request signature, as ``huaweicloudsdkcore`` makes it::

    Authorization: SDK-HMAC-SHA256 Access=<AK>, SignedHeaders=<h1;h2;...>, Signature=<hex>
    X-Sdk-Date: 20240101T120000Z

The canonical request is the method; the path with each segment decoded and percent-encoded again (only
``~`` kept) and a ``/`` at the end; the query (pairs sorted, names and values percent-encoded the same way);
one ``name:value`` line per signed header (lower-case names in the order listed, values trimmed), a blank
line; the signed header list; and the payload's hex SHA-256 (of an empty payload when there is none, or the
``X-Sdk-Content-Sha256`` header when the SDK sends ``UNSIGNED-PAYLOAD``), one per line. The string to sign is
the algorithm, ``X-Sdk-Date`` and the hex SHA-256 of the canonical request; the signature is the hex
HMAC-SHA256 of it with the secret. ``X-Sdk-Date`` and ``Host`` must be signed, and the date must lie within
``WINDOW_MS`` of the server's clock. The scheme has no nonce.
"""

from __future__ import annotations

import hashlib
import hmac
from datetime import UTC, datetime
from urllib.parse import quote, unquote

from ...store import ApiKey
from ..key_pairs import KeyPairs
from . import Reason, SignatureRefused, SignedRequest, authorization_fields, check_window, same

ALGORITHM = "SDK-HMAC-SHA256"
DATE_HEADER = "x-sdk-date"
REQUIRED = (DATE_HEADER, "host")
_EMPTY = hashlib.sha256(b"").hexdigest()


def is_signature(authorization: str) -> bool:
    """Whether ``authorization`` is one of Huawei Cloud's ``SDK-*`` signature forms (any algorithm)."""
    return authorization.startswith("SDK-")


def _fields(authorization: str) -> tuple[str, list[str], str]:
    return authorization_fields(authorization, ALGORITHM, ("Access", "SignedHeaders", "Signature"), served=ALGORITHM)


def canonical_request(request: SignedRequest, signed: list[str]) -> str:
    path = "/".join(quote(part, safe="~") for part in unquote(request.raw_path).split("/"))
    path = path if path.endswith("/") else path + "/"
    query = "&".join(f"{quote(k, safe='~')}={quote(v, safe='~')}" for k, v in sorted(request.query))
    lines = []
    for name in signed:
        value = request.header(name)
        if value is None:
            raise SignatureRefused(Reason.MALFORMED, f"the signed header {name!r} is missing from the request")
        lines.append(f"{name}:{value.strip()}\n")
    payload = request.header("x-sdk-content-sha256") or request.body_sha256() if request.body else _EMPTY
    return f"{request.method}\n{path}\n{query}\n{''.join(lines)}\n{';'.join(signed)}\n{payload}"


def signature(secret: str, date: str, canonical: str) -> str:
    string_to_sign = f"{ALGORITHM}\n{date}\n{hashlib.sha256(canonical.encode()).hexdigest()}"
    return hmac.new(secret.encode(), string_to_sign.encode(), hashlib.sha256).hexdigest()


def verify(request: SignedRequest, authorization: str, pairs: KeyPairs, now_ms: int) -> ApiKey:
    """The key of a correctly signed ``request``; SignatureRefused otherwise."""
    access_key_id, signed, given = _fields(authorization)
    missing = [name for name in REQUIRED if name not in signed]
    if missing:
        raise SignatureRefused(Reason.MALFORMED, f"the headers {', '.join(missing)} must be signed")
    date = request.header(DATE_HEADER) or ""
    try:
        moment = datetime.strptime(date, "%Y%m%dT%H%M%SZ").replace(tzinfo=UTC)
    except ValueError as exc:
        raise SignatureRefused(
            Reason.MALFORMED, f"X-Sdk-Date must be a UTC time such as 20240101T120000Z, got {date!r}"
        ) from exc
    check_window(int(moment.timestamp() * 1000), now_ms, "X-Sdk-Date")
    key, secret = pairs.secret(access_key_id)
    same(signature(secret, date, canonical_request(request, signed)), given)
    return key
