"""One call of the ClearML API: find the endpoint and its version, read the request, authenticate, answer.

Requests carry their parameters as a JSON body (ClearML clients send it with GET as well as POST) and, for a
few calls, in the query string; both are merged, the body winning. ``add_batch`` bodies are JSON lines and
are handed to the endpoint unparsed. Every failure is answered by :func:`envelope.error_response` with the
endpoint and versions of the call in ``meta``.
"""

from __future__ import annotations

import inspect
import logging
from dataclasses import dataclass, field
from typing import Any

from fastapi import FastAPI, Request
from starlette.concurrency import run_in_threadpool
from starlette.responses import Response

from ...errors import JobpulseError
from ...ingest.parse import decode
from ...server.context import Context, context
from ...server.routes.ingest import read_body
from ...store import ApiKey
from . import jsontext, versions
from .envelope import (
    GENERAL_ERROR,
    VALIDATION_ERROR,
    ClearmlError,
    error_response,
    from_jobpulse,
    ok_response,
)

log = logging.getLogger("jobpulse.clearml")
RAW_BODY = frozenset({"events.add_batch"})


@dataclass
class Call:
    request: Request
    ctx: Context
    name: str
    requested: versions.Version
    actual: versions.Version
    data: dict[str, Any] = field(default_factory=dict)
    raw: bytes = b""
    key: ApiKey | None = None

    @property
    def worker(self) -> str:
        headers = self.request.headers
        return headers.get("x-clearml-worker") or headers.get("x-trains-worker") or ""

    def since(self, version: str) -> bool:
        """Whether the answering version is ``version`` or newer (a parameter of that version applies)."""
        return versions.at_least(self.actual, version)

    @property
    def caller(self) -> ApiKey:
        assert self.key is not None, "endpoint registered without authentication"
        return self.key


def _parse_json(raw: bytes) -> Any:
    try:
        jsontext.check_depth(raw)  # its fields may be stored, and written out again
        return jsontext.loads(raw)
    except jsontext.Refused as exc:
        raise ClearmlError(VALIDATION_ERROR, f"request body is refused: {exc}") from exc
    except ValueError as exc:
        raise ClearmlError(VALIDATION_ERROR, f"request body is not valid JSON: {exc}") from exc


def _query(request: Request) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name in request.query_params:
        values = request.query_params.getlist(name)
        out[name] = values[0] if len(values) == 1 else values
    return out


class Dispatcher:
    def __init__(self, registry: versions.Registry, authenticate: Any) -> None:
        self.registry = registry
        self.authenticate = authenticate

    def install(self, app: FastAPI) -> None:
        for path in versions.route_paths():
            app.router.add_route(path, self.handle, methods=["GET", "POST", "PUT"], include_in_schema=False)

    async def handle(self, request: Request) -> Response:
        name, requested_text = "", None
        requested = actual = None
        try:
            match = versions.PATH.match(request.url.path)
            if match is None:  # the routes only send matching paths here
                raise ClearmlError(GENERAL_ERROR, f"invalid request path {request.url.path!r}")
            name = match.group("name")
            requested_text = match.group("version")
            requested = versions.parse_version(requested_text) if requested_text else versions.MAX_VERSION
            endpoint, actual = self.registry.resolve(name, versions.served(requested))
            # The caller is known before the body is read: an unknown one never gets to send a large body.
            key = await run_in_threadpool(self.authenticate, context(request), request) if endpoint.auth else None
            call = await self._call(request, name, requested, actual)
            call.key = key
            if inspect.iscoroutinefunction(endpoint.handler):
                result = await endpoint.handler(call)
            else:
                result = await run_in_threadpool(endpoint.handler, call)
            if isinstance(result, Response):
                return result
            return ok_response(result, name, versions.fmt(requested), versions.fmt(actual))
        except Exception as exc:
            return self.failure(exc, name, requested, actual, requested_text)

    def failure(
        self,
        exc: Exception,
        name: str,
        requested: versions.Version | None,
        actual: versions.Version | None,
        requested_text: str | None,
    ) -> Response:
        if isinstance(exc, JobpulseError):
            if exc.status >= 500:
                log.error("clearml %s failed: %s", name, exc.message)
            exc = from_jobpulse(exc)
        elif not isinstance(exc, ClearmlError):
            log.exception("clearml %s failed", name)
            exc = ClearmlError(GENERAL_ERROR, f"the server failed to handle {name or 'this request'}")
        return error_response(
            exc.code,
            exc.subcode,
            exc.message,
            endpoint=name,
            requested=versions.fmt(requested) if requested else requested_text,
            actual=versions.fmt(actual) if actual else None,
            error_data=exc.data,
            status=exc.http_status,
        )

    async def _call(self, request: Request, name: str, requested: versions.Version, actual: versions.Version) -> Call:
        ctx = context(request)
        call = Call(request=request, ctx=ctx, name=name, requested=requested, actual=actual)
        raw = await read_body(request, ctx.settings.max_body_bytes)
        raw = decode(raw, request.headers.get("content-encoding"), ctx.settings.max_body_bytes)
        data = _query(request)
        if name in RAW_BODY:
            call.raw = raw
        elif raw.strip():
            body = _parse_json(raw)
            if not isinstance(body, dict):
                raise ClearmlError(VALIDATION_ERROR, f"the body of {name} must be a JSON object")
            data.update(body)
        call.data = data
        return call
