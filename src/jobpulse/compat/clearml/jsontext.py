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
import re
from typing import Any

import numpy as np
import orjson

MAX_DEPTH = 64

_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_NOT_BRACKET = re.compile(rb"[^\[\]{}]+")
_STEP = np.zeros(256, dtype=np.int8)
_STEP[[ord("["), ord("{")]] = 1
_STEP[[ord("]"), ord("}")]] = -1


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


def depth(text: bytes | str) -> int:
    """How deeply the arrays and objects of JSON ``text`` nest (brackets inside strings do not count).

    Linear in the size of the text and without recursion, whatever the nesting; text that is not JSON gets a
    number too, which is what its brackets outside strings would nest to."""
    data = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else text
    if b"[" not in data and b"{" not in data:
        return 0
    brackets = _NOT_BRACKET.sub(b"", _STRING.sub(b"", data))
    if not brackets:
        return 0
    levels = np.cumsum(_STEP[np.frombuffer(brackets, dtype=np.uint8)], dtype=np.int64)
    return int(levels.max(initial=0))


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
