"""JSON responses encoded with orjson, and the native API's one error shape."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import numpy as np
import orjson
from starlette.responses import Response

_NONFINITE = {math.inf: "Infinity", -math.inf: "-Infinity"}


class JSON(Response):
    media_type = "application/json"

    def render(self, content: Any) -> bytes:
        return orjson.dumps(content, option=orjson.OPT_NON_STR_KEYS | orjson.OPT_SERIALIZE_NUMPY)


def error_body(status: int, code: str, message: str, field: str | None = None) -> dict[str, Any]:
    """The body of every native API error: ``{"error": {"status", "code", "message", "field"}}``."""
    return {"error": {"status": status, "code": code, "message": message, "field": field}}


def error_response(
    status: int, code: str, message: str, field: str | None = None, headers: dict[str, str] | None = None
) -> JSON:
    return JSON(error_body(status, code, message, field), status_code=status, headers=headers)


def float_text(value: float | None) -> float | str | None:
    """A float for JSON: NaN and infinities become "NaN", "Infinity" and "-Infinity"."""
    if value is None or math.isfinite(value):
        return value
    return "NaN" if value != value else _NONFINITE[value]


def floats(values: Iterable[float | None] | np.ndarray) -> list | np.ndarray:
    """A list of floats for JSON, keeping non-finite values as text (JSON has no literal for them)."""
    if isinstance(values, np.ndarray):
        if np.isfinite(values).all():
            return values  # orjson writes a numpy array directly
        values = values.tolist()
    return [float_text(v) for v in values]
