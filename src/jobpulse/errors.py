"""The exception tree of jobpulse.

    JobpulseError
     ├── BadRequest          400  input that is malformed or out of range; names the field
     │    └── PayloadTooLarge 413
     ├── Unauthorized        401  no credential, or one that is unknown or revoked
     ├── Forbidden           403  a valid credential without the right for this action
     ├── NotFound            404  a job, worker, key or file outside the caller's view
     ├── Conflict            409  an action the current state does not allow
     └── StoreUnavailable    503  the storage engine failed; nothing was acknowledged

Each API family turns these into its own error shape in one function.
"""

from __future__ import annotations


class JobpulseError(Exception):
    status = 500
    code = "internal_error"

    def __init__(self, message: str, *, field: str | None = None, code: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.field = field
        if code is not None:
            self.code = code


class BadRequest(JobpulseError):
    status = 400
    code = "bad_request"


class PayloadTooLarge(BadRequest):
    status = 413
    code = "payload_too_large"


class Unauthorized(JobpulseError):
    status = 401
    code = "unauthorized"


class Forbidden(JobpulseError):
    status = 403
    code = "forbidden"


class NotFound(JobpulseError):
    status = 404
    code = "not_found"


class Conflict(JobpulseError):
    status = 409
    code = "conflict"


class StoreUnavailable(JobpulseError):
    status = 503
    code = "store_unavailable"
