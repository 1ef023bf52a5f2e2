"""Credentials: how a jobpulse API key is used as ClearML credentials, and ``auth.login``.

ClearML clients hold an *access key* and a *secret key*. With jobpulse:

- access key = the jobpulse key id (the 12 hex digits after ``jp_`` in the token, shown by ``jobpulse keys
  list``), or the whole token again;
- secret key = the whole jobpulse API token (``jp_<key id>_<secret>``).

``auth.login`` takes them as HTTP Basic credentials and answers a token: a JWT (HS256, signed with a key
derived from the server's shared signing secret) whose claims carry what ClearML clients read
(``api_version``, ``server_version``, ``feature_set``, ``identity``, ``exp``) and, in ``jp``, a signed
jobpulse session of the key. Every other call sends ``Authorization: Bearer <that token>``; the session is
checked by the server's single access check, so a revoked key stops working, and the key's projects and role
apply unchanged. Calls may also use Basic credentials directly, or ``Bearer <jobpulse token>``. A token
lives as long as a UI session (``session_hours``) or less when ``expiration_sec`` asks for less; any replica
accepts it.

Reading a file of the files server (:func:`file_reader`) also accepts what a browser sends with an ``<img>``:
the ClearML web app's session cookie (``clearml_token_basic``, a token of ``auth.login``) and jobpulse's own UI
session cookie. Uploads and deletions take the ``Authorization`` header only (a cookie alone must not change
anything).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import time
from typing import Any

import orjson
from fastapi import FastAPI, Request

from ...errors import Unauthorized
from ...server.access import SESSION_COOKIE
from ...server.context import Context
from ...store import ApiKey
from .dispatch import Call
from .envelope import BAD_CREDENTIALS, INVALID_CREDENTIALS, INVALID_TOKEN, NO_CREDENTIALS, ClearmlError
from .params import integer
from .versions import MAX_VERSION, Registry, fmt

SERVER_VERSION = "2.0.0"  # the ClearML server release line whose API (2.31, versions.MAX_VERSION) jobpulse speaks


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


class Tokens:
    """Makes and checks the JWTs handed out by ``auth.login``; one per app."""

    _HEADER = _b64(orjson.dumps({"alg": "HS256", "typ": "JWT"}))

    def __init__(self, ctx: Context) -> None:
        self._ctx = ctx
        self._key = hmac.new(ctx.store.state.secret(), b"clearml-token", hashlib.sha256).digest()

    def make(self, key: ApiKey, expiration_s: int | None = None) -> str:
        settings = self._ctx.settings
        ttl = settings.session_hours * 3600
        if expiration_s is not None:
            ttl = max(60, min(ttl, expiration_s))
        now = int(time.time())
        claims = {
            "env": "jobpulse",
            "api_version": fmt(MAX_VERSION),
            "server_version": SERVER_VERSION,
            "server_build": "jobpulse",
            "feature_set": "basic",
            "user_key": key.key_id,
            "identity": {
                "company": "jobpulse",
                "company_name": "jobpulse",
                "user": key.key_id,
                "user_name": key.name or key.key_id,
                "role": "admin" if key.role == "admin" else "user",
            },
            "iat": now,
            "exp": now + ttl,
            "jp": self._ctx.access.session_for(key.key_id),
        }
        signed = f"{self._HEADER}.{_b64(orjson.dumps(claims))}"
        mac = hmac.new(self._key, signed.encode(), hashlib.sha256).digest()
        return f"{signed}.{_b64(mac)}"

    def check(self, token: str) -> ApiKey:
        """The key behind ``token``: its signature and expiry are checked here (microseconds), the key itself
        by ``Access.session_key``, which remembers it until it is revoked."""
        try:
            header, body, mac = token.split(".")
            expected = hmac.new(self._key, f"{header}.{body}".encode(), hashlib.sha256).digest()
            if not hmac.compare_digest(expected, _unb64(mac)):
                raise ValueError("signature")
            claims = orjson.loads(_unb64(body))
        except (ValueError, binascii.Error, orjson.JSONDecodeError):
            raise ClearmlError(INVALID_TOKEN, "invalid token: not issued by this server; log in again") from None
        if not isinstance(claims, dict) or claims.get("exp", 0) < time.time():
            raise ClearmlError(INVALID_TOKEN, "invalid token: expired; log in again")
        try:
            key = self._ctx.access.session_key(str(claims.get("jp", "")))
        except Unauthorized as exc:
            raise ClearmlError(INVALID_TOKEN, f"invalid token: {exc.message}") from None
        return key


def tokens(request: Request) -> Tokens:
    return request.app.state.clearml_tokens


def login_key(ctx: Context, access_key: str, secret_key: str) -> ApiKey:
    """The jobpulse key behind a ClearML access key / secret key pair."""
    if not secret_key:
        raise ClearmlError(BAD_CREDENTIALS, "missing secret key: use the jobpulse API token as the secret key")
    try:
        key = ctx.access.authenticate(secret_key.strip())
    except Unauthorized:
        raise ClearmlError(
            INVALID_CREDENTIALS,
            "invalid credentials: the secret key is not a valid jobpulse API token, or the key was revoked",
        ) from None
    if access_key.strip() not in (key.key_id, secret_key.strip()):
        raise ClearmlError(
            INVALID_CREDENTIALS,
            f"invalid credentials: the access key must be the key id of the token given as secret key ({key.key_id})",
        )
    return key


def _basic(value: str) -> tuple[str, str]:
    try:
        decoded = base64.b64decode(value.strip(), validate=True).decode()
    except (binascii.Error, UnicodeDecodeError):
        raise ClearmlError(BAD_CREDENTIALS, "malformed Basic credentials") from None
    access, sep, secret = decoded.partition(":")
    if not sep:
        raise ClearmlError(BAD_CREDENTIALS, "malformed Basic credentials: expected access_key:secret_key")
    return access, secret


def authenticate(ctx: Context, request: Request) -> ApiKey:
    """The caller of a ClearML endpoint (Bearer token from ``auth.login``, Bearer jobpulse key, or Basic)."""
    header = request.headers.get("authorization", "").strip()
    scheme, _, value = header.partition(" ")
    scheme, value = scheme.lower(), value.strip()
    if not header:
        raise ClearmlError(
            NO_CREDENTIALS,
            "missing credentials: call auth.login with the access key and secret "
            "key, then send 'Authorization: Bearer <token>'",
        )
    if scheme == "basic":
        return login_key(ctx, *_basic(value))
    if scheme != "bearer" or not value:
        raise ClearmlError(BAD_CREDENTIALS, f"unsupported authorization scheme {scheme!r}: use Bearer or Basic")
    if value.startswith("jp_"):
        try:
            return ctx.access.authenticate(value)
        except Unauthorized as exc:
            raise ClearmlError(INVALID_CREDENTIALS, exc.message) from None
    return tokens(request).check(value)


CLEARML_COOKIE = "clearml_token_basic"


def file_reader(ctx: Context, request: Request) -> ApiKey:
    """The caller of a file download: the ``Authorization`` header as on the API, else the ClearML web app's
    session cookie, else jobpulse's UI session cookie."""
    if request.headers.get("authorization", "").strip():
        return authenticate(ctx, request)
    token = request.cookies.get(CLEARML_COOKIE, "").strip()
    if token:
        return tokens(request).check(token)
    session = request.cookies.get(SESSION_COOKIE, "").strip()
    if session:
        try:
            return ctx.access.session_key(session)
        except Unauthorized as exc:
            raise ClearmlError(INVALID_TOKEN, f"invalid session: {exc.message}") from None
    raise ClearmlError(
        NO_CREDENTIALS,
        "missing credentials: send 'Authorization: Bearer <token of auth.login>' (as the ClearML SDK does), "
        f"or the {CLEARML_COOKIE} cookie of the ClearML web app, or sign in to jobpulse's UI",
    )


def login(call: Call) -> dict[str, Any]:
    """``auth.login``: trade Basic credentials (or a valid token) for a fresh token."""
    expiration = integer(call.data, "expiration_sec", minimum=1)
    key = authenticate(call.ctx, call.request)
    return {"token": tokens(call.request).make(key, expiration)}


def install(app: FastAPI, registry: Registry) -> None:
    app.state.clearml_tokens = Tokens(app.state.ctx)
    registry.add("auth.login", "1.5 2.1", login, auth=False)
