"""Reading every point of a metric: ``scalar_metrics_iter_raw`` and ``get_scalar_metric_data``.

- ``scalar_metrics_iter_raw``: every point of a metric's variants, ``batch_size`` (default 10,000, at most
  200,000) per call, with a signed cursor that keeps the batch size (a call with the scroll id alone gets as many
  as the first); ``total`` is exact when ``count_total``.
- ``get_scalar_metric_data``: every point of one metric (all its variants) as scalar events, 10,000 a call.
- Values are 64-bit floats; NaN and infinities are answered as null.
"""

from __future__ import annotations

from typing import Any

from ...store.scalars import MAX_PAGE
from . import mapping
from .dispatch import Call
from .envelope import INVALID_SCROLL_ID, ClearmlError
from .events_scalars import finite, finites, model_events
from .params import choice, flag, integer, required, strings, text
from .params import mapping as obj

RAW_SCROLL = "clearml-raw"
DATA_SCROLL = "clearml-scalar-data"


def scalar_event(
    job: str, metric: str, variant: str, iteration: int, ts: int, value: float, worker: str = ""
) -> dict[str, Any]:
    event = {
        "timestamp": ts,
        "type": "training_stats_scalar",
        "task": job,
        "iter": iteration,
        "metric": metric,
        "variant": variant,
        "value": finite(value),
    }
    if worker:
        event["worker"] = worker
    return event


def _pages(
    call: Call, job: str, metric: str, variants: list[str] | None, after: tuple[str, int] | None, limit: int
) -> tuple[dict[str, list], tuple[str, int] | None]:
    """Points of ``variants`` (all when None) in (variant, iter) order after ``after``, and what follows."""
    store = call.ctx.store.scalars
    if variants is None:
        cols, nxt = store.page(job, metric, after=after, limit=limit)
        return {**cols, "iter": cols["iter"].tolist(), "ts": cols["ts"].tolist()}, nxt
    merged: dict[str, list] = {"variant": [], "iter": [], "ts": [], "value": []}
    for variant in sorted(set(variants)):
        if after is not None and variant < after[0]:
            continue
        remaining = limit - len(merged["iter"])
        cols, _ = store.page(
            job,
            metric,
            variant=variant,
            after=after if after and after[0] == variant else None,
            limit=remaining,
        )
        for name in merged:
            merged[name].extend(cols[name].tolist() if name in ("iter", "ts") else list(cols[name]))
        if len(merged["iter"]) >= limit:
            return merged, (merged["variant"][-1], merged["iter"][-1])
    return merged, None


def scalar_metrics_iter_raw(call: Call) -> dict[str, Any]:
    job = mapping.job_for(call.ctx, call.caller, required(call.data, "task"), model=model_events(call)).job
    spec = obj(call.data, "metric") or {}
    metric = text(spec, "metric", required_=True)
    variants = strings(spec, "variants") or None
    key = choice(call.data, "key", ("iter", "timestamp"), "iter")
    asked = integer(call.data, "batch_size", minimum=0)
    size = min(asked or 10_000, MAX_PAGE)
    total, after = None, None
    scroll_id = text(call.data, "scroll_id")
    if scroll_id:
        state = _scroll(call, RAW_SCROLL, scroll_id, job)
        if state.get("end"):
            return {"variants": {}, "total": state["total"], "returned": 0, "scroll_id": scroll_id}
        metric, variants, key, total = state["m"], state["v"], state["k"], state["total"]
        after = tuple(state["a"]) if state.get("a") else None
        size = min(asked or state.get("n") or 10_000, MAX_PAGE)
    elif flag(call.data, "count_total"):
        total = call.ctx.store.scalars.count([job], metric, variants)
    cols, nxt = _pages(call, job, metric, variants, after, size)
    out: dict[str, dict[str, list]] = {}
    xs = cols["iter"] if key == "iter" else cols["ts"]
    for variant, x, y in zip(cols["variant"], xs, finites(cols["value"]), strict=True):
        entry = out.setdefault(variant, {"y": [], key: []})
        entry["y"].append(y)
        entry[key].append(x)
    state = {
        "task": job,
        "m": metric,
        "v": variants,
        "k": key,
        "n": size,
        "total": total,
        "a": list(nxt) if nxt else None,
        "end": nxt is None,
    }
    return {
        "variants": out,
        "total": total,
        "returned": len(cols["iter"]),
        "scroll_id": call.ctx.signer.sign(RAW_SCROLL, state, ttl_s=7 * 86_400),
    }


def _scroll(call: Call, purpose: str, scroll_id: str, job: str) -> dict[str, Any]:
    try:
        state = call.ctx.signer.verify(purpose, scroll_id, field="scroll_id")
    except Exception:
        raise ClearmlError(INVALID_SCROLL_ID, "invalid scroll id", scroll_id=scroll_id) from None
    if state.get("task") != job:
        raise ClearmlError(INVALID_SCROLL_ID, "the scroll id belongs to another task or query", scroll_id=scroll_id)
    return state


def get_scalar_metric_data(call: Call) -> dict[str, Any]:
    """Every point of one metric (all its variants) as scalar events, 10,000 a call, with a scroll id."""
    job = mapping.job_for(call.ctx, call.caller, required(call.data, "task"), model=model_events(call)).job
    metric = text(call.data, "metric", required_=True)
    assert metric is not None
    scroll_id = text(call.data, "scroll_id")
    after, total = None, None
    if scroll_id:
        state = _scroll(call, DATA_SCROLL, scroll_id, job)
        if state.get("end") or state.get("m") != metric:
            return {"events": [], "returned": 0, "total": state["total"], "scroll_id": scroll_id}
        after, total = tuple(state["a"]), state["total"]
    if total is None:
        total = call.ctx.store.scalars.count([job], metric)
    cols, nxt = call.ctx.store.scalars.page(job, metric, after=after, limit=10_000)
    events = [
        scalar_event(job, metric, v, i, t, x)
        for v, i, t, x in zip(
            cols["variant"], cols["iter"].tolist(), cols["ts"].tolist(), cols["value"].tolist(), strict=True
        )
    ]
    answer: dict[str, Any] = {"events": events, "returned": len(events), "total": total, "scroll_id": None}
    if not (call.since("2.16") and flag(call.data, "no_scroll")):
        state = {
            "task": job,
            "m": metric,
            "total": total,
            "a": list(nxt) if nxt else None,
            "end": nxt is None,
        }
        answer["scroll_id"] = call.ctx.signer.sign(DATA_SCROLL, state, ttl_s=7 * 86_400)
    return answer
