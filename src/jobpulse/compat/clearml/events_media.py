"""Reading plots, debug images and all the events of a task.

- ``get_task_events``: every event of a task (or only ``event_type``) in timestamp order (``order``), 500 a
  call (``batch_size``), with a signed scroll id; ``total`` is exact. Events of equal timestamp keep one fixed
  order (scalars, then vectors/plots/images, then logs), so paging never repeats or skips one.
- ``get_task_plots`` / ``get_multi_task_plots`` / ``debug_images`` 2.1: the events of the latest ``iters``
  iterations (default 1) of each metric and variant.
- ``debug_images`` 2.7+ and ``plots`` 2.20+: for each requested task and metric (and variants, 2.14+), the
  events of ``iters`` iterations grouped by iteration, newest first; the scroll id remembers the iterations
  each metric showed last, and the next call brings the ``iters`` iterations before them
  (``navigate_earlier``, the default) or after them; ``refresh`` starts again from the newest.
- Sample navigation (``get_debug_image_sample`` ...) is in :mod:`.events_samples`.
"""

from __future__ import annotations

from typing import Any

import orjson

from ...store import Job
from . import events_samples, mapping
from .dispatch import Call
from .envelope import FIELDS_VALUE_ERROR, INVALID_SCROLL_ID, ClearmlError
from .events_logs import log_event
from .events_points import scalar_event
from .events_scalars import EVENT_KINDS, metric_variants, model_events
from .params import choice, flag, integer, objects, required, strings, text

TYPE_OF = {"vector": "training_stats_vector", "plot": "plot", "image": "training_debug_image"}
TASK_EVENTS_SCROLL = "clearml-task-events"
METRIC_SCROLL = "clearml-metric-events"
SCROLL_TTL_S = 7 * 86_400
MAX_READ = 10_000

get_debug_image_sample = events_samples.get_debug_image_sample
next_debug_image_sample = events_samples.next_debug_image_sample
get_plot_sample = events_samples.get_plot_sample
next_plot_sample = events_samples.next_plot_sample


def plot_str(payload: str) -> str:
    if payload == "null" or not payload:
        return ""
    if payload.startswith('"'):
        text_value = orjson.loads(payload)
        return text_value if isinstance(text_value, str) else payload
    return payload


def media_event(job: str, kind: str, row: dict[str, Any]) -> dict[str, Any]:
    """A stored vector, plot or image row as the ClearML event it came from."""
    event: dict[str, Any] = {
        "timestamp": row["ts"],
        "type": TYPE_OF[kind],
        "task": job,
        "iter": row["iter"],
        "metric": row["metric"],
        "variant": row["variant"],
    }
    if row.get("worker"):
        event["worker"] = row["worker"]
    if row.get("model_event"):
        event["model_event"] = True
    payload = row.get("payload") or ""
    if kind == "plot":
        event["plot_str"] = plot_str(payload)
    elif kind == "vector":
        event["value"] = orjson.loads(payload) if payload else []
    else:
        meta = orjson.loads(payload) if payload else {}
        event["key"] = meta.get("key", row["key"]) if isinstance(meta, dict) else row["key"]
        if row["url"]:
            event["url"] = row["url"]
    return event


def read_all(call: Call, job: str, kind: str, **filters: Any) -> list[dict[str, Any]]:
    """Rows of one kind (up to 10,000) in (metric, variant, iter, key) order."""
    return call.ctx.store.events.read(job, kind, limit=MAX_READ, **filters)


def _wanted(rows: list[dict[str, Any]], metrics: dict[str, list[str] | None] | None) -> list[dict[str, Any]]:
    if metrics is None:
        return rows
    return [
        r
        for r in rows
        if r["metric"] in metrics and (not metrics[r["metric"]] or r["variant"] in (metrics[r["metric"]] or []))
    ]


# -- all events of a task ------------------------------------------------------------------------------------


def _log_line(row: dict[str, Any]) -> dict[str, Any]:
    """A log row of the timeline as the log line it is (its sequence number is ``n`` + 2^63)."""
    seq = int(row["n"]) + (1 << 63)
    return {"ts": row["ts"], "worker": row["worker"], "seq": seq, "level": row["level"], "msg": row["msg"]}


def _timeline_event(job: str, row: dict[str, Any], log_fields: dict[tuple, dict[str, Any]]) -> dict[str, Any]:
    kind = row["kind"]
    if kind == "scalar":
        return scalar_event(job, row["a"], row["b"], int(row["n"]), row["ts"], row["value"], row["worker"])
    if kind == "log":
        line = _log_line(row)
        return log_event(job, line, log_fields.get((line["ts"], line["worker"], line["seq"])))
    return media_event(
        job,
        kind,
        {
            "ts": row["ts"],
            "iter": int(row["n"]),
            "metric": row["a"],
            "variant": row["b"],
            "key": row["key"],
            "url": row["url"],
            "payload": row["payload"],
            "worker": row["worker"],
            "model_event": row["model_event"],
        },
    )


def get_task_events(call: Call) -> dict[str, Any]:
    model = model_events(call)
    job = mapping.job_for(call.ctx, call.caller, required(call.data, "task"), model=model).job
    size = min(integer(call.data, "batch_size", 500, minimum=1) or 500, MAX_READ)
    scroll_id = text(call.data, "scroll_id")
    if scroll_id:
        state = _verify(call, TASK_EVENTS_SCROLL, scroll_id, job)
        if state.get("end"):
            return {"events": [], "returned": 0, "total": state["total"], "scroll_id": scroll_id}
        sources, descending, total = tuple(state["s"]), state["desc"], state["total"]
        after = tuple(state["a"]) if state.get("a") else None
    else:
        event_type = choice(call.data, "event_type", tuple(EVENT_KINDS))
        sources = (EVENT_KINDS[event_type],) if event_type else ("scalar", "vector", "plot", "image", "log")
        if model:
            sources = tuple(s for s in sources if s != "log")
        descending = choice(call.data, "order", ("asc", "desc"), "asc") == "desc"
        after = None
        total = call.ctx.store.events.timeline_count(job, sources)
    rows = call.ctx.store.events.timeline(job, sources, after=after, descending=descending, limit=size)
    log_fields = call.ctx.store.logs.fields(job, [_log_line(row) for row in rows if row["kind"] == "log"])
    events = [_timeline_event(job, row, log_fields) for row in rows]
    last = rows[-1] if rows else None
    state = {
        "task": job,
        "s": list(sources),
        "desc": descending,
        "total": total,
        "end": len(rows) < size,
        "a": [last["ts"], last["src"], last["a"], last["b"], int(last["n"]), last["c"]] if last else None,
    }
    return {
        "events": events,
        "returned": len(events),
        "total": total,
        "scroll_id": call.ctx.signer.sign(TASK_EVENTS_SCROLL, state, ttl_s=SCROLL_TTL_S),
    }


def _verify(call: Call, purpose: str, scroll_id: str, job: str | None) -> dict[str, Any]:
    try:
        state = call.ctx.signer.verify(purpose, scroll_id, field="scroll_id")
    except Exception:
        raise ClearmlError(INVALID_SCROLL_ID, "invalid scroll id", scroll_id=scroll_id) from None
    if job is not None and state.get("task") != job:
        raise ClearmlError(INVALID_SCROLL_ID, "the scroll id belongs to another task", scroll_id=scroll_id)
    return state


# -- latest iterations per metric and variant ----------------------------------------------------------------


def _latest(
    call: Call, job: str, kind: str, iters: int, metrics: dict[str, list[str] | None] | None
) -> list[dict[str, Any]]:
    rows = _wanted(read_all(call, job, kind, last_iters=iters), metrics)
    events = [media_event(job, kind, row) for row in rows]
    events.sort(key=lambda e: (-e["iter"], e["metric"], e["variant"]))
    return events


def _no_more(call: Call, job: str, total: int) -> str:
    return call.ctx.signer.sign(METRIC_SCROLL, {"task": job, "end": True, "total": total}, ttl_s=SCROLL_TTL_S)


def get_task_plots(call: Call) -> dict[str, Any]:
    job = mapping.job_for(call.ctx, call.caller, required(call.data, "task"), model=model_events(call)).job
    iters = integer(call.data, "iters", 1, minimum=1) or 1
    if text(call.data, "scroll_id"):
        _verify(call, METRIC_SCROLL, text(call.data, "scroll_id") or "", job)
        return {"plots": [], "returned": 0, "total": 0, "scroll_id": text(call.data, "scroll_id")}
    plots = _latest(call, job, "plot", iters, metric_variants(call))
    no_scroll = call.since("2.16") and flag(call.data, "no_scroll")
    return {
        "plots": plots,
        "returned": len(plots),
        "total": len(plots),
        "scroll_id": None if no_scroll else _no_more(call, job, len(plots)),
    }


def get_multi_task_plots(call: Call) -> dict[str, Any]:
    ids = strings(call.data, "tasks", required_=True, split_commas=True) or []
    jobs = mapping.jobs_for(call.ctx, call.caller, ids, model=model_events(call))
    iters = integer(call.data, "iters", 1, minimum=1) or 1
    if text(call.data, "scroll_id"):
        _verify(call, METRIC_SCROLL, text(call.data, "scroll_id") or "", None)
        return {"plots": {}, "returned": 0, "total": 0, "scroll_id": text(call.data, "scroll_id")}
    plots: dict[str, Any] = {}
    count = 0
    for job_id in dict.fromkeys(ids):
        for event in _latest(call, job_id, "plot", iters, metric_variants(call, since="2.22")):
            leaf = plots.setdefault(event["metric"], {}).setdefault(event["variant"], {}).setdefault(job_id, {})
            leaf.setdefault(str(event["iter"]), {"name": jobs[job_id].name, "plots": []})["plots"].append(event)
            count += 1
    no_scroll = call.since("2.16") and flag(call.data, "no_scroll")
    return {
        "plots": plots,
        "returned": count,
        "total": count,
        "scroll_id": None if no_scroll else _no_more(call, ",".join(ids), count),
    }


# -- iterations of task metrics, with a scroll ---------------------------------------------------------------


def _task_metrics(call: Call) -> list[tuple[str, str, list[str] | None]]:
    items = objects(call.data, "metrics", required_=True) or []
    out = []
    for item in items:
        task, metric = item.get("task"), item.get("metric")
        if not isinstance(task, str):
            raise ClearmlError(FIELDS_VALUE_ERROR, "each entry of 'metrics' needs a 'task'", field="metrics")
        variants = item.get("variants") if call.since("2.14") else None
        out.append((task, metric if isinstance(metric, str) else "", variants or None))
    return out


def _iterations(
    call: Call,
    job: Job,
    kind: str,
    metric: str,
    variants: list[str] | None,
    iters: int,
    below: int | None,
    above: int | None,
) -> list[dict[str, Any]]:
    """The events of ``iters`` iterations of one metric (all metrics when empty): the latest below ``below``,
    or the earliest above ``above``; grouped by iteration, newest first."""
    filters: dict[str, Any] = {"metric": metric or None, "with_url": kind == "image"}  # as ClearML shows them
    if above is not None:
        rows = read_all(call, job.job, kind, iter_min=above + 1, **filters)
    else:
        rows = read_all(call, job.job, kind, iter_max=None if below is None else below - 1, last_iters=iters, **filters)
    if variants:
        rows = [r for r in rows if r["variant"] in variants]
    chosen = sorted({r["iter"] for r in rows})
    chosen = chosen[:iters] if above is not None else chosen[-iters:]
    keep = set(chosen)
    groups: dict[int, list[dict[str, Any]]] = {}
    for row in rows:
        if row["iter"] in keep:
            groups.setdefault(row["iter"], []).append(media_event(job.job, kind, row))
    return [{"iter": it, "events": groups[it]} for it in sorted(groups, reverse=True)]


def _metric_events(call: Call, kind: str) -> dict[str, Any]:
    model = model_events(call)
    requested = _task_metrics(call)
    jobs = mapping.jobs_for(call.ctx, call.caller, [t for t, _, _ in requested], model=model)
    iters = integer(call.data, "iters", 1, minimum=1) or 1
    earlier = flag(call.data, "navigate_earlier", True)
    bounds: dict[str, list] = {}
    scroll_id = text(call.data, "scroll_id")
    if scroll_id and not flag(call.data, "refresh"):
        bounds = _verify(call, METRIC_SCROLL, scroll_id, None).get("b", {})
    out, state = [], {}
    for task, metric, variants in requested:
        name = f"{task}/{metric}"
        low, high = bounds.get(name, [None, None])
        if low is None:
            below, above = (None, None) if earlier else (None, -(1 << 62))
        else:
            below, above = (low, None) if earlier else (None, high)
        iterations = _iterations(call, jobs[task], kind, metric, variants, iters, below, above)
        seen = [i["iter"] for i in iterations]
        state[name] = [min(seen), max(seen)] if seen else [low, high]  # the page shown last
        out.append({"task": task, "iterations": iterations})
    return {
        "scroll_id": call.ctx.signer.sign(METRIC_SCROLL, {"b": state}, ttl_s=SCROLL_TTL_S),
        "metrics": out,
    }


def _legacy_debug_images(call: Call) -> dict[str, Any]:
    job = mapping.job_for(call.ctx, call.caller, required(call.data, "task")).job
    iters = integer(call.data, "iters", 1, minimum=1) or 1
    if text(call.data, "scroll_id"):
        _verify(call, METRIC_SCROLL, text(call.data, "scroll_id") or "", job)
        return {
            "task": job,
            "images": [],
            "returned": 0,
            "total": 0,
            "scroll_id": text(call.data, "scroll_id"),
        }
    images = _latest(call, job, "image", iters, None)
    return {
        "task": job,
        "images": images,
        "returned": len(images),
        "total": len(images),
        "scroll_id": _no_more(call, job, len(images)),
    }


def debug_images(call: Call) -> dict[str, Any]:
    return _metric_events(call, "image") if call.since("2.7") else _legacy_debug_images(call)


def plots(call: Call) -> dict[str, Any]:
    return _metric_events(call, "plot")
