"""How the CLI writes for people: tables, times, durations, values and metric keys.

Times are local (``2024-05-01 08:55:03``); ``--json`` gives the API's epoch milliseconds instead.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Iterable, Sequence
from typing import Any

import orjson

_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d)")
_UNIT_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
NONFINITE = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}


def table(rows: Sequence[Sequence[str]], header: Sequence[str]) -> str:
    """Columns padded to their widest cell, two spaces apart; the last column is not padded."""
    every = [list(header), *[list(r) for r in rows]]
    widths = [max(len(r[i]) for r in every) for i in range(len(header))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r[:-1], widths, strict=False)) + "  " + r[-1] for r in every]
    return "\n".join(line.rstrip() for line in lines)


def when(ms: int | None, *, seconds: bool = True, millis: bool = False) -> str:
    """A local time of epoch milliseconds; ``-`` for none."""
    if ms is None:
        return "-"
    text = time.strftime("%Y-%m-%d %H:%M:%S" if seconds or millis else "%Y-%m-%d %H:%M", time.localtime(ms / 1000))
    return f"{text}.{int(ms) % 1000:03d}" if millis else text


def duration(ms: int | float | None) -> str:
    """``45s``, ``3m05s``, ``2h03m``, ``3d04h``; ``-`` for none."""
    if ms is None or ms < 0:
        return "-"
    s = int(ms // 1000)
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    if s < 86_400:
        return f"{s // 3600}h{s % 3600 // 60:02d}m"
    return f"{s // 86_400}d{s % 86_400 // 3600:02d}h"


def job_times(job: dict[str, Any], workers: Iterable[dict[str, Any]] = (), now_ms: int | None = None) -> tuple:
    """(started, ended, duration in ms) of a job: its start is its own or its first worker's, whichever is
    earlier; a job that still runs lasts until now."""
    starts = [w["started"] for w in workers if w.get("started")]
    own = job.get("started") or job.get("created")
    started = min([own, *starts]) if own and starts else own or (min(starts) if starts else None)
    ended = job.get("ended")
    if started is None:
        return None, ended, None
    if ended is None and job.get("status") != "running":
        return started, None, None
    end = ended if ended is not None else (now_ms if now_ms is not None else int(time.time() * 1000))
    return started, ended, max(0, end - started)


def number(value: Any) -> str:
    """A value as the API gives it (a float, or "NaN"/"Infinity" text), short: 6 significant digits."""
    if value is None:
        return "-"
    if isinstance(value, str):
        return {"NaN": "nan", "Infinity": "inf", "-Infinity": "-inf"}.get(value, value)
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    return f"{value:.6g}" if isinstance(value, float) else str(value)


def as_float(value: Any) -> float:
    """A value of the API as a float (NaN and infinities come as text)."""
    return NONFINITE[value] if isinstance(value, str) else float(value)


def key_name(metric: str, variant: str) -> str:
    """The name of a series for people: the metric where the variant repeats it (or is empty), else
    ``metric/variant``."""
    return metric if variant in ("", metric) else f"{metric}/{variant}"


def since_ms(text: str, now_ms: int | None = None) -> int:
    """``--since``: a duration back from now (``10m``, ``1h30m``, ``2d``), epoch milliseconds, or an ISO 8601
    time (local unless it names its zone); ValueError naming the option otherwise."""
    from datetime import datetime

    raw = text.strip()
    now = int(time.time() * 1000) if now_ms is None else now_ms
    parts = _DURATION.findall(raw)
    if parts and "".join(n + u for n, u in parts) == raw:
        return now - int(sum(float(n) * _UNIT_MS[u] for n, u in parts))
    if raw.isdigit():
        return int(raw)
    try:
        moment = datetime.fromisoformat(raw.replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(
            f"--since must be a duration (10m, 1h30m, 2d), epoch milliseconds or an ISO 8601 time, got {text!r}"
        ) from None
    return int(moment.timestamp() * 1000)


def json_text(value: Any) -> str:
    return orjson.dumps(value, option=orjson.OPT_INDENT_2).decode()
