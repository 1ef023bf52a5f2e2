"""Reading a task's console log: ``events.get_task_log`` (every version) and ``events.download_task_log``.

Lines are read by their position (timestamp, worker, sequence), a total order, so paging never skips or
repeats a line, even when thousands share one millisecond:

- 1.5 scrolls in ``order`` (ascending unless ``desc``); 1.7 scrolls from the ``head`` or the ``tail``
  (``from``) and returns each page in ``order``. The ``scroll_id`` is a signed cursor holding the position
  of the page's last line; any replica continues from it, and one that is past the end answers no events.
- 2.9 has no scroll id: a client pages with ``from_timestamp`` (lines strictly earlier than it when
  ``navigate_earlier``, the default, else strictly later). So that no line is lost between pages, a page
  always ends with *every* line of its last timestamp, even past ``batch_size`` (ClearML stops at 10,000).
  ``order`` reverses a page whose natural order (descending when navigating earlier) is not the one asked.
- ``total`` is the exact number of the task's lines (2.30: of those naming one of ``metrics``).
- A line is answered as ClearML stores it: ``metric`` and ``variant`` ("" where it named none) and ``iter``
  where it named one; 2.30 reads only the lines naming one of ``metrics`` (``[{metric, variants}]``).
- ``download_task_log`` streams the whole log: ``line_type=json`` writes one JSON object a line
  (``asctime`` and ``timestamp`` in epoch ms, ``level``, ``worker``, ``msg``); ``text`` formats each line with
  ``line_format`` (placeholders ``asctime`` as an ISO 8601 UTC time, ``timestamp`` in epoch ms, ``level``,
  ``worker``, ``msg``).
"""

from __future__ import annotations

import string
from collections.abc import AsyncIterator
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import orjson
from starlette.concurrency import run_in_threadpool
from starlette.responses import StreamingResponse

from ...server.context import Context
from ...store import LogFilter
from ...store.logs import MAX_LINES
from . import mapping
from .dispatch import Call
from .envelope import FIELDS_VALUE_ERROR, INVALID_SCROLL_ID, MISSING_FIELDS, ClearmlError
from .params import choice, flag, integer, number, objects, required, text

SCROLL = "clearml-log"
SCROLL_TTL_S = 7 * 86_400
_CHUNK = 20_000
PLACEHOLDERS = {"asctime", "timestamp", "level", "worker", "msg"}


def log_event(task: str, line: dict[str, Any], fields: dict[str, Any] | None = None) -> dict[str, Any]:
    """A stored line as the ClearML log event it came from; ``fields``: the metric, variant and iteration it
    named (``Logs.fields``)."""
    event = {
        "timestamp": line["ts"],
        "type": "log",
        "task": task,
        "level": line["level"],
        "worker": line["worker"],
        "msg": line["msg"],
        "metric": fields["metric"] if fields else "",
        "variant": fields["variant"] if fields else "",
    }
    if fields and fields["iter"] is not None:
        event["iter"] = fields["iter"]
    return event


def log_events(ctx: Context, task: str, lines: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``lines`` (rows with ts, worker, seq, level and msg) as ClearML log events."""
    fields = ctx.store.logs.fields(task, lines)
    return [log_event(task, line, fields.get((line["ts"], line["worker"], line["seq"]))) for line in lines]


def metrics_filter(call: Call) -> LogFilter:
    """The lines a 2.30 call asks for by ``metrics``: ``[{metric, variants}]``."""
    if not call.since("2.30"):
        return LogFilter()
    wanted = []
    for item in objects(call.data, "metrics") or []:
        metric, variants = item.get("metric"), item.get("variants") or []
        if (
            not isinstance(metric, str)
            or not isinstance(variants, list)
            or not all(isinstance(v, str) for v in variants)
        ):
            raise ClearmlError(
                FIELDS_VALUE_ERROR, "each entry of 'metrics' is {metric: string, variants: [string]}", field="metrics"
            )
        wanted.append((metric, tuple(variants)))
    return LogFilter(metrics=tuple(wanted))


def _position(line: dict[str, Any]) -> tuple[int, str, int]:
    return line["ts"], line["worker"], line["seq"]


def read_page(
    ctx: Context, job: str, direction: str, position: tuple | None, size: int, where: LogFilter = LogFilter()
) -> list[dict[str, Any]]:
    """Up to ``size`` lines in ``direction`` from ``position``, in reading order (latest first backward)."""
    lines = ctx.store.logs.read(job, direction=direction, position=position, limit=size, where=where)
    return lines if direction == "forward" else lines[::-1]


def _with_ties(
    ctx: Context, job: str, direction: str, lines: list[dict[str, Any]], where: LogFilter = LogFilter()
) -> list[dict[str, Any]]:
    """Extend a page with the rest of the lines (of ``where``) that share its last timestamp."""
    while lines:
        last = lines[-1]
        if direction == "forward":
            same = replace(where, since_ms=None, until_ms=last["ts"])
        else:
            same = replace(where, since_ms=last["ts"], until_ms=None)
        more = read_page(ctx, job, direction, _position(last), _CHUNK, same)
        lines.extend(more)
        if len(more) < _CHUNK:
            break
    return lines


def _v29(call: Call, job: str, size: int) -> dict[str, Any]:
    earlier = flag(call.data, "navigate_earlier", True)
    direction = "backward" if earlier else "forward"
    start = number(call.data, "from_timestamp")
    named = metrics_filter(call)
    where = named
    if start is not None:
        bound = int(start)
        where = replace(named, until_ms=bound - 1) if earlier else replace(named, since_ms=bound + 1)
    lines = _with_ties(call.ctx, job, direction, read_page(call.ctx, job, direction, None, size, where), named)
    order = choice(call.data, "order", ("asc", "desc"))
    if (earlier and order == "asc") or (not earlier and order == "desc"):
        lines.reverse()
    events = log_events(call.ctx, job, lines)
    return {"events": events, "returned": len(events), "total": call.ctx.store.logs.count(job, named)}


def _scrolled(call: Call, job: str, size: int) -> dict[str, Any]:
    order = choice(call.data, "order", ("asc", "desc"), "asc")
    if call.since("1.7"):
        head = choice(call.data, "from", ("head", "tail"), "head") == "head"
        direction = "forward" if head else "backward"
    else:
        direction = "forward" if order == "asc" else "backward"
    scroll_id = text(call.data, "scroll_id")
    position, total = None, None
    if scroll_id:
        try:
            state = call.ctx.signer.verify(SCROLL, scroll_id, field="scroll_id")
        except Exception:
            raise ClearmlError(INVALID_SCROLL_ID, "invalid scroll id", scroll_id=scroll_id) from None
        if state.get("task") != job:
            raise ClearmlError(INVALID_SCROLL_ID, "the scroll id belongs to another task", scroll_id=scroll_id)
        direction, total = state["d"], state["total"]
        if state.get("end"):
            return {"events": [], "returned": 0, "total": total, "scroll_id": scroll_id}
        position = tuple(state["p"]) if state.get("p") else None
    if total is None:
        total = call.ctx.store.logs.count(job)
    lines = read_page(call.ctx, job, direction, position, size)
    state = {
        "task": job,
        "d": direction,
        "total": total,
        "p": list(_position(lines[-1])) if lines else (list(position) if position else None),
        "end": len(lines) < size,
    }
    if (direction == "forward") != (order == "asc"):
        lines.reverse()
    events = log_events(call.ctx, job, lines)
    return {
        "events": events,
        "returned": len(events),
        "total": total,
        "scroll_id": call.ctx.signer.sign(SCROLL, state, ttl_s=SCROLL_TTL_S),
    }


def get_task_log(call: Call) -> dict[str, Any]:
    job = mapping.job_for(call.ctx, call.caller, required(call.data, "task")).job
    size = integer(call.data, "batch_size", 500, minimum=1) or 500
    size = min(size, MAX_LINES)
    return _v29(call, job, size) if call.since("2.9") else _scrolled(call, job, size)


def _text_formatter(line_format: str) -> Any:
    try:
        names = {field for _, field, _, _ in string.Formatter().parse(line_format) if field is not None}
    except ValueError as exc:
        raise ClearmlError(FIELDS_VALUE_ERROR, f"invalid line format: {exc}", field="line_format") from None
    unknown = sorted(n for n in names if n.split(".")[0].split("[")[0] not in PLACEHOLDERS)
    if unknown or "" in names:
        raise ClearmlError(
            FIELDS_VALUE_ERROR,
            "undefined placeholders in line format: "
            f"{', '.join(unknown) or '{}'} (use {', '.join(sorted(PLACEHOLDERS))})",
            placeholders=unknown,
            field="line_format",
        )
    template = line_format.rstrip("\n") + "\n"

    def render(line: dict[str, Any]) -> bytes:
        when = datetime.fromtimestamp(line["ts"] / 1000, tz=UTC).isoformat(timespec="milliseconds")
        return template.format(
            asctime=when.replace("+00:00", "Z"),
            timestamp=line["ts"],
            level=line["level"],
            worker=line["worker"],
            msg=line["msg"],
        ).encode()

    return render


def _json_line(line: dict[str, Any]) -> bytes:
    return (
        orjson.dumps(
            {
                "asctime": line["ts"],
                "timestamp": line["ts"],
                "level": line["level"],
                "worker": line["worker"],
                "msg": line["msg"],
            }
        )
        + b"\n"
    )


def download_task_log(call: Call) -> StreamingResponse:
    job = mapping.job_for(call.ctx, call.caller, required(call.data, "task")).job
    line_type = str(call.data.get("line_type") or "json").lower()
    if line_type not in ("json", "text"):
        raise ClearmlError(
            FIELDS_VALUE_ERROR, f"'line_type' must be json or text, got {line_type!r}", field="line_type"
        )
    if line_type == "text":
        line_format = call.data.get("line_format", "{asctime} {worker} {level} {msg}")
        if not isinstance(line_format, str) or not line_format:
            raise ClearmlError(MISSING_FIELDS, "line_format is required for plain text lines", fields=["line_format"])
        encode = _text_formatter(line_format)
    else:
        encode = _json_line
    ctx = call.ctx

    async def stream() -> AsyncIterator[bytes]:
        position = None
        while True:
            lines = await run_in_threadpool(
                ctx.store.logs.read, job, direction="forward", position=position, limit=_CHUNK
            )
            if not lines:
                return
            yield b"".join(encode(line) for line in lines)
            if len(lines) < _CHUNK:
                return
            position = _position(lines[-1])

    return StreamingResponse(
        stream(),
        media_type="text/plain; charset=utf-8",
        headers={"Content-Disposition": f'attachment; filename="task_{job}.log"'},
    )
