"""Stepping through debug images and plots one sample at a time.

``get_debug_image_sample`` answers the image of a metric's variant at ``iteration`` (the latest one at or
before it, or the latest of all), with the variant's first and last iteration; ``next_debug_image_sample``
moves from there to the next variant of the same iteration or the first of the next iteration (the previous
ones with ``navigate_earlier``), within the same metric unless ``navigate_current_metric`` was false, or with
``next_iteration`` (2.22) to the same variant's next (previous) iteration. Plots work the same per metric:
``get_plot_sample`` answers all the variants of a metric at one iteration, ``next_plot_sample`` moves to the
next metric or iteration. The scroll id is a signed cursor holding the current position. Past the last (first)
sample there is nothing: as on a ClearML server the answer has no event (``event`` null, ``events`` empty, no
iteration range) and the same scroll id, from which the other direction still works.

Debug images without a URL are not samples (ClearML shows only images it can load); an image whose URL a
later image of its series took over is gone (store/events.py).
"""

from __future__ import annotations

from typing import Any

from . import mapping
from .dispatch import Call
from .envelope import INVALID_SCROLL_ID, ClearmlError
from .events_scalars import model_events
from .params import flag, integer, required, text

SCROLL = "clearml-sample"
SCROLL_TTL_S = 7 * 86_400


def _read(call: Call, job: str, kind: str, limit: int = 10_000, **filters: Any) -> list[dict[str, Any]]:
    return call.ctx.store.events.read(job, kind, limit=limit, with_url=kind == "image", **filters)


def _series(call: Call, job: str, kind: str) -> list[dict[str, Any]]:
    return call.ctx.store.events.metrics(job, kind, with_url=kind == "image")


def _event(job: str, kind: str, row: dict[str, Any]) -> dict[str, Any]:
    from .events_media import media_event

    return media_event(job, kind, row)


def _range(call: Call, job: str, kind: str, metric: str, variant: str | None) -> tuple[int | None, int | None]:
    rows = [
        r for r in _series(call, job, kind) if r["metric"] == metric and (variant is None or r["variant"] == variant)
    ]
    if not rows:
        return None, None
    return min(r["first_iter"] for r in rows), max(r["last_iter"] for r in rows)


def _at_or_before(
    call: Call, job: str, kind: str, metric: str, variant: str | None, iteration: int | None
) -> int | None:
    rows = _read(call, job, kind, metric=metric, variant=variant, iter_max=iteration, last_iters=1)
    return max((r["iter"] for r in rows), default=None)


def _key(kind: str, iteration: int, metric: str, variant: str) -> tuple:
    return (iteration, metric, variant) if kind == "image" else (iteration, metric)


def _step(
    call: Call, job: str, kind: str, position: tuple, scope: str | None, series: tuple | None, earlier: bool
) -> tuple | None:
    """The sample after (before) ``position`` in (iteration, metric[, variant]) order, among the samples of
    metric ``scope`` (all when None), or of one ``series`` (metric[, variant]) when given."""
    pairs = [
        (r["metric"], r["variant"])
        for r in _series(call, job, kind)
        if (scope is None or r["metric"] == scope)
        and (series is None or (r["metric"], r["variant"])[: len(series)] == series)
    ]
    iteration = position[0]
    if series is None:  # another sample of the same iteration first
        here = {
            _key(kind, r["iter"], r["metric"], r["variant"])
            for r in _read(call, job, kind, metric=scope, iter_min=iteration, iter_max=iteration)
            if (r["metric"], r["variant"]) in pairs
        }
        candidates = sorted(k for k in here if (k < position if earlier else k > position))
        if candidates:
            return candidates[-1] if earlier else candidates[0]
    found: set[tuple] = set()
    for metric, variant in pairs:
        if earlier:
            rows = _read(call, job, kind, metric=metric, variant=variant, iter_max=iteration - 1, last_iters=1)
        else:
            rows = _read(call, job, kind, limit=1, metric=metric, variant=variant, iter_min=iteration + 1)
        found.update(_key(kind, r["iter"], metric, variant) for r in rows)
    if not found:
        return None
    target = max(k[0] for k in found) if earlier else min(k[0] for k in found)
    same = sorted(k for k in found if k[0] == target)
    return same[-1] if earlier else same[0]


def _answer(call: Call, job: str, kind: str, state: dict[str, Any]) -> dict[str, Any]:
    metric, variant, iteration = state["m"], state.get("v"), state.get("i")
    per_variant = kind == "image"
    low, high = _range(call, job, kind, metric, variant if per_variant else None)
    rows = (
        []
        if iteration is None
        else _read(
            call,
            job,
            kind,
            metric=metric,
            variant=variant if per_variant else None,
            iter_min=iteration,
            iter_max=iteration,
        )
    )
    answer: dict[str, Any] = {
        "scroll_id": call.ctx.signer.sign(SCROLL, state, ttl_s=SCROLL_TTL_S),
        "min_iteration": low,
        "max_iteration": high,
    }
    if per_variant:
        answer["event"] = _event(job, kind, rows[-1]) if rows else None
    else:
        answer["events"] = [_event(job, kind, r) for r in rows]
    return answer


def _first(call: Call, kind: str) -> dict[str, Any]:
    job = mapping.job_for(call.ctx, call.caller, required(call.data, "task"), model=model_events(call)).job
    metric = text(call.data, "metric", required_=True)
    variant = text(call.data, "variant", required_=True) if kind == "image" else None
    iteration = integer(call.data, "iteration")
    current_metric = flag(call.data, "navigate_current_metric", True) if call.since("2.20") else True
    scroll_id = text(call.data, "scroll_id")
    if scroll_id and not flag(call.data, "refresh") and iteration is None:
        state = _state(call, scroll_id, job, kind)
        if (state["m"], state.get("v")) == (metric, variant):
            return _answer(call, job, kind, state)
    found = _at_or_before(call, job, kind, metric or "", variant, iteration)
    state = {"task": job, "k": kind, "m": metric, "v": variant, "i": found, "cm": current_metric}
    return _answer(call, job, kind, state)


def _state(call: Call, scroll_id: str, job: str, kind: str) -> dict[str, Any]:
    try:
        state = call.ctx.signer.verify(SCROLL, scroll_id, field="scroll_id")
    except Exception:
        raise ClearmlError(INVALID_SCROLL_ID, "invalid scroll id", scroll_id=scroll_id) from None
    if state.get("task") != job or state.get("k") != kind:
        raise ClearmlError(
            INVALID_SCROLL_ID, "the scroll id belongs to another task or kind of sample", scroll_id=scroll_id
        )
    return state


def _next(call: Call, kind: str) -> dict[str, Any]:
    job = mapping.job_for(call.ctx, call.caller, required(call.data, "task"), model=model_events(call)).job
    state = _state(call, text(call.data, "scroll_id", required_=True) or "", job, kind)
    if state.get("i") is None:
        return _answer(call, job, kind, state)
    earlier = flag(call.data, "navigate_earlier")
    next_iteration = call.since("2.22") and flag(call.data, "next_iteration")
    position = _key(kind, state["i"], state["m"], state.get("v") or "")
    series = position[1:] if next_iteration else None
    found = _step(call, job, kind, position, state["m"] if state.get("cm", True) else None, series, earlier)
    if found is None:
        nothing: dict[str, Any] = {"scroll_id": text(call.data, "scroll_id"), "min_iteration": None}
        nothing.update(
            {"max_iteration": None, "event": None} if kind == "image" else {"max_iteration": None, "events": []}
        )
        return nothing
    state = dict(state, i=found[0], m=found[1], v=found[2] if kind == "image" else None)
    return _answer(call, job, kind, state)


def get_debug_image_sample(call: Call) -> dict[str, Any]:
    return _first(call, "image")


def next_debug_image_sample(call: Call) -> dict[str, Any]:
    return _next(call, "image")


def get_plot_sample(call: Call) -> dict[str, Any]:
    return _first(call, "plot")


def next_plot_sample(call: Call) -> dict[str, Any]:
    return _next(call, "plot")
