"""JSON text from ClearML clients, read without unbounded recursion.

orjson reads almost everything; Python clients also write ``NaN`` and ``Infinity`` as bare words, which only
Python's ``json`` module reads, and that module recurses once per level of nesting. So before any JSON text
reaches it, and before any nested value is kept (a plot, a request body whose fields are stored and written
out again), its nesting is measured by :func:`depth`, which reads the text once, without recursion, and must
not exceed :data:`MAX_DEPTH` — far deeper than any ClearML request or plotly figure, and well inside what
orjson writes back (it stops at 255 levels, and a stored value is written inside an answer's own levels).
What Python's parser reads must also be something the server can write back: an integer beyond 64 bits or a
string with a lone surrogate (``"\\ud800"``) is refused rather than failing later, when it is stored or answered.
"""

from __future__ import annotations

import json
from typing import Any

import orjson

from ...ingest.limits import MAX_DEPTH, depth

__all__ = ["MAX_DEPTH", "Refused", "TooDeep", "check_depth", "depth", "loads"]


class Refused(ValueError):
    """JSON text the server reads but does not take; ``reason`` says why, in a few words ("is ...", "holds ...")."""

    def __init__(self, message: str, reason: str) -> None:
        super().__init__(message)
        self.reason = reason


class TooDeep(Refused):
    """JSON text nested deeper than :data:`MAX_DEPTH`."""

    def __init__(self, found: int) -> None:
        message = f"arrays and objects nest {found} levels deep; at most {MAX_DEPTH} are accepted"
        super().__init__(message, f"is nested deeper than {MAX_DEPTH} levels")
        self.found = found


def check_depth(text: bytes | str) -> None:
    """Raise :class:`TooDeep` when ``text`` nests deeper than :data:`MAX_DEPTH`."""
    found = depth(text)
    if found > MAX_DEPTH:
        raise TooDeep(found)


def loads(text: bytes | str) -> Any:
    """The value of JSON ``text``, ``NaN`` and ``Infinity`` included; ``ValueError`` when it is not JSON, and
    :class:`Refused` (a ``ValueError``) when only Python's parser could read it and it nests too deep or holds
    what the server cannot write back."""
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        check_depth(text)
    try:
        value = json.loads(text)
    except RecursionError as exc:  # the caller's own stack was deep already
        raise TooDeep(depth(text)) from exc
    try:
        orjson.dumps(value)
    except orjson.JSONEncodeError as exc:
        reason = "holds an integer beyond 64 bits or a lone surrogate"
        raise Refused(f"it {reason} ({exc})", reason) from exc
    return value
