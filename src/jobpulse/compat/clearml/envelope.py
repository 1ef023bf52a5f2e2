"""ClearML's response wrapping and its error codes.

Every answer of the ClearML API is ``{"meta": {...}, "data": {...}}``; ``meta`` carries a random ``id`` and
``trx``, the endpoint with the version the caller asked for and the version that answered, and the result:
``result_code`` (the HTTP status too), ``result_subcode`` and ``result_msg``. Errors use ClearML's codes
(400/11 missing required fields, 400/101 invalid task id, 401/22 invalid credentials, ...) and put what was
wrong in ``error_data``. :func:`error_response` is the one function that shapes an error of this API family;
:func:`from_jobpulse` translates the server's own exceptions into ClearML codes.
"""

from __future__ import annotations

import math
import uuid
from typing import Any

import orjson
from starlette.responses import Response

from ...errors import (
    BadRequest,
    Conflict,
    Forbidden,
    JobpulseError,
    NotFound,
    PayloadTooLarge,
    StoreUnavailable,
    Unauthorized,
)

# (code, subcode) of the errors jobpulse answers with; the names are ClearML's.
NOT_SUPPORTED = (400, 1)
INVALID_VERSION = (400, 2)
INVALID_ID = (400, 10)
MISSING_FIELDS = (400, 11)
VALIDATION_ERROR = (400, 12)
FIELDS_CONFLICT = (400, 15)
FIELDS_VALUE_ERROR = (400, 16)
BATCH_EMPTY = (400, 17)
FIELDS_TYPE_ERROR = (400, 20)
INVALID_REGEX = (400, 21)
INVALID_TASK_ID = (400, 101)
INVALID_TASK_STATUS = (400, 110)
INVALID_TASK_TYPE = (400, 126)
EVENTS_NOT_ADDED = (400, 131)
INVALID_MODEL_ID = (400, 201)
INVALID_PROJECT_ID = (400, 401)
PROJECT_EXISTS = (400, 402)
INVALID_SCROLL_ID = (400, 1104)
NO_CREDENTIALS = (401, 20)
BAD_CREDENTIALS = (401, 21)
INVALID_CREDENTIALS = (401, 22)
INVALID_TOKEN = (401, 30)
ROLE_NOT_ALLOWED = (403, 20)
NO_WRITE_PERMISSION = (403, 21)
ENDPOINT_NOT_FOUND = (404, 0)
GENERAL_ERROR = (500, 0)
DATABASE_UNAVAILABLE = (500, 102)


class ClearmlError(Exception):
    """An error answered as ClearML answers it: ``code``/``subcode``, a message and ``error_data``."""

    def __init__(self, kind: tuple[int, int], message: str, *, http_status: int | None = None, **data: Any) -> None:
        super().__init__(message)
        self.code, self.subcode = kind
        self.message = message
        self.data = data
        self.http_status = http_status


def _json_default(value: Any) -> Any:
    if isinstance(value, (set, frozenset, tuple)):
        return list(value)
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


def _dumps(body: Any) -> bytes:
    # orjson writes NaN and infinities as null, which is what ClearML clients can parse.
    return orjson.dumps(body, default=_json_default, option=orjson.OPT_NON_STR_KEYS | orjson.OPT_SERIALIZE_NUMPY)


class ClearmlJSON(Response):
    media_type = "application/json"

    def render(self, content: Any) -> bytes:
        return _dumps(content)


def meta(
    endpoint: str,
    requested: str | None,
    actual: str | None,
    code: int = 200,
    subcode: int = 0,
    message: str = "OK",
    error_data: dict[str, Any] | None = None,
) -> dict[str, Any]:
    return {
        "id": uuid.uuid4().hex,
        "trx": uuid.uuid4().hex,
        "endpoint": {"name": endpoint, "requested_version": requested, "actual_version": actual},
        "result_code": code,
        "result_subcode": subcode,
        "result_msg": message,
        "error_stack": "",
        "error_data": error_data or {},
    }


def ok_response(data: Any, endpoint: str, requested: str | None, actual: str | None) -> ClearmlJSON:
    return ClearmlJSON({"meta": meta(endpoint, requested, actual), "data": data if data is not None else {}})


def error_response(
    code: int,
    subcode: int,
    message: str,
    *,
    endpoint: str = "",
    requested: str | None = None,
    actual: str | None = None,
    error_data: dict[str, Any] | None = None,
    status: int | None = None,
) -> ClearmlJSON:
    """The one shape of every error of the ClearML API: result code, subcode and message in ``meta``."""
    body = {
        "meta": meta(endpoint, requested, actual, code, subcode, message, _plain(error_data or {})),
        "data": {},
    }
    headers = {"WWW-Authenticate": 'Bearer realm="clearml"'} if code == 401 else None
    return ClearmlJSON(body, status_code=status or code, headers=headers)


def _plain(data: dict[str, Any]) -> dict[str, Any]:
    out = {}
    for name, value in data.items():
        if isinstance(value, float) and not math.isfinite(value):
            value = str(value)
        out[name] = value
    return out


def from_jobpulse(exc: JobpulseError) -> ClearmlError:
    """The ClearML error for one of the server's own exceptions."""
    data = {"field": exc.field} if exc.field else {}
    if isinstance(exc, PayloadTooLarge):
        return ClearmlError(VALIDATION_ERROR, exc.message, **data)
    if isinstance(exc, BadRequest):
        if exc.field in ("cursor", "scroll_id"):
            return ClearmlError(INVALID_SCROLL_ID, exc.message, **data)
        return ClearmlError(VALIDATION_ERROR, exc.message, **data)
    if isinstance(exc, Unauthorized):
        return ClearmlError(INVALID_CREDENTIALS, exc.message)
    if isinstance(exc, Forbidden):
        kind = NO_WRITE_PERMISSION if "'write'" in exc.message or "may not write" in exc.message else ROLE_NOT_ALLOWED
        return ClearmlError(kind, exc.message, **data)
    if isinstance(exc, NotFound):
        if exc.field in ("job", "task", "jobs", "tasks"):
            return ClearmlError(INVALID_TASK_ID, exc.message.replace("job ", "task ", 1), **data)
        return ClearmlError(ENDPOINT_NOT_FOUND if exc.field is None else INVALID_ID, exc.message, **data)
    if isinstance(exc, Conflict):
        return ClearmlError(INVALID_TASK_STATUS if exc.field == "status" else FIELDS_CONFLICT, exc.message, **data)
    if isinstance(exc, StoreUnavailable):
        # HTTP 503 makes ClearML clients wait and retry; nothing of the request was acknowledged.
        return ClearmlError(DATABASE_UNAVAILABLE, exc.message, http_status=503)
    return ClearmlError(GENERAL_ERROR, exc.message)


def render_shape(status: int, code: str, message: str, field: str | None) -> Response:
    """Errors raised outside an endpoint of this family (unknown path, bad method): still ClearML-shaped."""
    if status in (404, 405):
        return error_response(
            *ENDPOINT_NOT_FOUND,
            message
            if status == 404 and message != "no such endpoint"
            else "Unable to find endpoint for this path and method",
        )
    kinds = {
        400: VALIDATION_ERROR,
        401: INVALID_CREDENTIALS,
        403: ROLE_NOT_ALLOWED,
        413: VALIDATION_ERROR,
        503: DATABASE_UNAVAILABLE,
    }
    kind = kinds.get(status, GENERAL_ERROR)
    return error_response(
        *kind, message, error_data={"field": field} if field else None, status=503 if status == 503 else None
    )
