"""JSON responses encoded with orjson, Arrow IPC streams of columns, and the native API's one error shape."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import numpy as np
import orjson
from starlette.responses import Response

_NONFINITE = {math.inf: "Infinity", -math.inf: "-Infinity"}


ARROW_STREAM = "application/vnd.apache.arrow.stream"


def wants_arrow(accept: str | None) -> bool:
    """Whether an Accept header asks for an Arrow IPC stream."""
    return bool(accept) and ARROW_STREAM in accept.lower()


def arrow_stream(columns: dict[str, Any], types: dict[str, str], metadata: dict[str, str]) -> Response:
    """One record batch of ``columns`` (lists or numpy arrays) of ``types`` (Arrow aliases such as
    ``int64``; an empty or all-null list has no type of its own), with ``metadata`` on its schema."""
    import pyarrow as pa  # server-only dependency, as the store is

    table = pa.table({name: pa.array(values, type=pa.type_for_alias(types[name])) for name, values in columns.items()})
    table = table.replace_schema_metadata(metadata)
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return Response(sink.getvalue().to_pybytes(), media_type=ARROW_STREAM)


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
