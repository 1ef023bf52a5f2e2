"""Turn an ingest body into table columns, by its Content-Type (see docs/ingest.md).

JSON lines (``lines.py``), the columnar form (``columnar.py``) and Arrow (``arrow.py``) each read their body into
the rules' columns; ``rules.py`` decides which events are good for all three. Nothing here touches the store.
"""

from __future__ import annotations

import time
from typing import Any

from ..errors import BadRequest
from .arrow import CONTENT_TYPE as ARROW
from .arrow import parse_arrow
from .batch import Batch
from .columnar import parse_columnar
from .encoding import decode
from .lines import parse_lines
from .rules import ITER_MAX, ITER_MIN, KINDS, MAX_MSG, MAX_NAME, MAX_PAYLOAD, TS_AHEAD, TS_MIN

# what other modules import from here
__all__ = [
    "ITER_MAX",
    "ITER_MIN",
    "KINDS",
    "MAX_MSG",
    "MAX_NAME",
    "MAX_PAYLOAD",
    "TS_AHEAD",
    "TS_MIN",
    "Batch",
    "decode",
    "parse_body",
]
LINES = ("application/x-ndjson", "application/jsonl", "application/json-lines", "text/plain", "")


def parse_body(
    data: bytes,
    content_type: str | None,
    defaults: dict[str, Any],
    *,
    max_events: int,
    now_ms: int | None = None,
) -> Batch:
    """The events of a decoded body: the good ones as table columns, the bad ones counted per reason."""
    now_ms = now_ms if now_ms is not None else time.time_ns() // 1_000_000
    kind = (content_type or "").split(";")[0].strip().lower()
    if kind in LINES:
        return parse_lines(data, defaults, max_events, now_ms)
    batch = Batch()
    if kind == "application/json":
        parse_columnar(data, defaults, batch, max_events, now_ms)
    elif kind == ARROW:
        parse_arrow(data, defaults, batch, max_events, now_ms)
    else:
        raise BadRequest(
            f"Content-Type {content_type!r} is not supported; use application/x-ndjson, application/json or {ARROW}",
            field="Content-Type",
        )
    return batch
