"""Alibaba Cloud's request signatures, as ``alibabacloud_tea_openapi`` makes them.

``ACS3-HMAC-SHA256`` (the SDK's default)::

    Authorization: ACS3-HMAC-SHA256 Credential=<AK>,SignedHeaders=<h1;h2;...>,Signature=<hex>

The canonical request is the method, the path as sent, the query (parameters sorted by name, values
percent-encoded with only ``~`` kept), one ``name:value`` line per signed header (lower-case names in the
order listed, several values sorted and joined by commas), a blank line, the signed header list, and the
payload's SHA-256 (``x-acs-content-sha256``), one per line. The string to sign is the algorithm and the hex
SHA-256 of the canonical request; the signature is the hex HMAC-SHA256 of it with the secret. ``host``,
``x-acs-date`` (ISO 8601 UTC), ``x-acs-signature-nonce`` and ``x-acs-content-sha256`` must be signed.

The ROA signature (``signature_algorithm='v2'``)::

    Authorization: acs <AK>:<base64 HMAC-SHA1>

signs the method, ``Accept``, ``Content-MD5``, ``Content-Type`` and ``Date`` (RFC 1123), one line each, then
every ``x-acs-*`` header as ``name:value`` lines sorted by name, then the path with the query (parameters
sorted by name, values as they are, a bare name for an empty value). ``Date`` and
``x-acs-signature-nonce`` are required, and ``x-acs-signature-method`` must be ``HMAC-SHA1``.

Either way the date must lie within ``WINDOW_MS`` of the server's clock, and the nonce may be shown once.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from urllib.parse import quote

from ...store import ApiKey
from ..key_pairs import KeyPairs
from . import (
    WINDOW_MS,
    Reason,
    SignatureRefused,
    SignedRequest,
    authorization_fields,
    check_nonce,
    check_window,
    same,
)

ACS3 = "ACS3-HMAC-SHA256"
ROA = "acs"
ACS3_REQUIRED = ("host", "x-acs-date", "x-acs-signature-nonce", "x-acs-content-sha256")


def is_signature(authorization: str) -> bool:
    """Whether ``authorization`` is one of Alibaba Cloud's signature forms (any algorithm)."""
    return authorization.startswith("ACS3-") or authorization.startswith(ROA + " ")


def verify(request: SignedRequest, authorization: str, pairs: KeyPairs, now_ms: int) -> ApiKey:
    """The key of a correctly signed ``request``; SignatureRefused otherwise."""
    if authorization.startswith(ROA + " "):
        return _verify_roa(request, authorization, pairs, now_ms)
    return _verify_acs3(request, authorization, pairs, now_ms)


# -- ACS3-HMAC-SHA256 ----------------------------------------------------------------------------------------


def _acs3_fields(authorization: str) -> tuple[str, list[str], str]:
    names = ("Credential", "SignedHeaders", "Signature")
    return authorization_fields(authorization, ACS3, names, served=f"{ACS3} (the SDK's default) or 'v2'")


def acs3_canonical_request(request: SignedRequest, signed: list[str], payload_hash: str) -> str:
    query = "&".join(f"{name}={quote(value, safe='~')}" for name, value in sorted(request.query, key=lambda p: p[0]))
    lines = []
    for name in signed:
        values = request.headers.get(name)
        if values is None:
            raise SignatureRefused(Reason.MALFORMED, f"the signed header {name!r} is missing from the request")
        lines.append(f"{name}:{','.join(sorted(v.strip() for v in values))}\n")
    headers = "".join(lines)
    return f"{request.method}\n{request.raw_path or '/'}\n{query}\n{headers}\n{';'.join(signed)}\n{payload_hash}"


def acs3_signature(secret: str, canonical_request: str) -> str:
    digest = hashlib.sha256(canonical_request.encode()).hexdigest()
    return hmac.new(secret.encode(), f"{ACS3}\n{digest}".encode(), hashlib.sha256).hexdigest()


def _verify_acs3(request: SignedRequest, authorization: str, pairs: KeyPairs, now_ms: int) -> ApiKey:
    access_key_id, signed, signature = _acs3_fields(authorization)
    missing = [name for name in ACS3_REQUIRED if name not in signed]
    if missing:
        raise SignatureRefused(Reason.MALFORMED, f"the headers {', '.join(missing)} must be signed")
    date = _iso_date(request.header("x-acs-date") or "")
    check_window(date, now_ms, "x-acs-date")
    nonce = check_nonce(request.header("x-acs-signature-nonce"), "x-acs-signature-nonce")
    payload_hash = request.header("x-acs-content-sha256") or ""
    if payload_hash != request.body_sha256():
        raise SignatureRefused(Reason.MISMATCH, "x-acs-content-sha256 is not the SHA-256 of the request's body")
    key, secret = pairs.secret(access_key_id)
    same(acs3_signature(secret, acs3_canonical_request(request, signed, payload_hash)), signature)
    pairs.claim_nonce(key, nonce, date + WINDOW_MS)
    return key


def _iso_date(text: str) -> int:
    try:
        moment = datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
    except ValueError as exc:
        raise SignatureRefused(
            Reason.MALFORMED, f"x-acs-date must be a UTC time such as 2024-01-01T12:00:00Z, got {text!r}"
        ) from exc
    return int(moment.timestamp() * 1000)


# -- ROA (v2) ------------------------------------------------------------------------------------------------


def roa_string_to_sign(request: SignedRequest) -> str:
    head = [request.method] + [request.header(n) or "" for n in ("accept", "content-md5", "content-type", "date")]
    acs = "".join(f"{name}:{request.header(name)}\n" for name in sorted(request.headers) if name.startswith("x-acs-"))
    resource = request.raw_path
    if request.query:
        params = sorted(request.query, key=lambda p: p[0])
        resource += "?" + "&".join(name if value == "" else f"{name}={value}" for name, value in params)
    return "\n".join(head) + "\n" + acs + resource


def roa_signature(secret: str, string_to_sign: str) -> str:
    return base64.b64encode(hmac.new(secret.encode(), string_to_sign.encode(), hashlib.sha1).digest()).decode()


def _verify_roa(request: SignedRequest, authorization: str, pairs: KeyPairs, now_ms: int) -> ApiKey:
    access_key_id, sep, signature = authorization[len(ROA) + 1 :].strip().rpartition(":")
    if not sep or not access_key_id or not signature:
        raise SignatureRefused(Reason.MALFORMED, "the Authorization header must read 'acs <AccessKeyId>:<signature>'")
    method = request.header("x-acs-signature-method") or "HMAC-SHA1"
    if method != "HMAC-SHA1":
        raise SignatureRefused(Reason.MALFORMED, f"x-acs-signature-method {method!r} is not served: use HMAC-SHA1")
    text = request.header("date") or ""
    try:
        date = int(parsedate_to_datetime(text).timestamp() * 1000)
    except (TypeError, ValueError) as exc:
        raise SignatureRefused(
            Reason.MALFORMED, f"the Date header must be an HTTP date (Mon, 01 Jan 2024 12:00:00 GMT), got {text!r}"
        ) from exc
    check_window(date, now_ms, "Date")
    nonce = check_nonce(request.header("x-acs-signature-nonce"), "x-acs-signature-nonce")
    key, secret = pairs.secret(access_key_id)
    same(roa_signature(secret, roa_string_to_sign(request)), signature)
    pairs.claim_nonce(key, nonce, date + WINDOW_MS)
    return key
