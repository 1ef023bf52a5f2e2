"""What the caller's values must be to go on the wire: iterations in range, plots as JSON.

Shared by the caller side (``jobpulse.sdk.run``, ``jobpulse.sdk.checks``) and the sender
(``jobpulse.sdk.wire``, ``jobpulse.sdk.split``): the range of an iteration, ``check_iter``,
``plot_json``, and the orjson options every JSON body is written with.
"""

from __future__ import annotations

import math

import orjson

ITER_MIN = -(2**31)
ITER_MAX = 2**53

JSON_OPTS = orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_NON_STR_KEYS


def check_iter(value: object) -> int:
    it = int(value)  # type: ignore[call-overload]
    if not ITER_MIN <= it <= ITER_MAX:
        raise ValueError(f"iteration {it} is outside [-2^31, 2^53]")
    return it


def plot_json(plot: object) -> bytes:
    """A Plotly figure (anything with ``to_json``/``to_plotly_json``), dict or JSON string, as JSON bytes."""
    if isinstance(plot, str | bytes):
        raw = plot.encode() if isinstance(plot, str) else plot
        if not isinstance(orjson.loads(raw), dict):
            raise TypeError("a plot in JSON must be an object")
        return raw
    to_json = getattr(plot, "to_json", None)
    if callable(to_json):
        text = to_json()
        return text.encode() if isinstance(text, str) else text
    to_plotly = getattr(plot, "to_plotly_json", None)
    if callable(to_plotly):
        plot = to_plotly()
    if not isinstance(plot, dict):
        raise TypeError(f"a plot must be a Plotly figure, a dict or a JSON string, not {type(plot).__name__}")
    return orjson.dumps(plot, option=JSON_OPTS, default=_default)


def _default(obj: object) -> object:
    tolist = getattr(obj, "tolist", None)
    if callable(tolist):
        return tolist()
    if isinstance(obj, set | frozenset | tuple):
        return list(obj)
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    return str(obj)
