"""The events service: adding and deleting events, and the table of every ``events.*`` endpoint.

Reading is in :mod:`.events_logs` (logs), :mod:`.events_scalars` (scalars and vectors) and
:mod:`.events_media` (plots, debug images, all events of a task). Where ClearML is known to be wrong jobpulse
does better without changing what clients see: scroll ids are signed, self-contained cursors that any replica
accepts (``clear_scroll`` has nothing to free); totals are exact rather than capped at 10,000; values are
64-bit floats; log paging never skips or repeats lines that share a timestamp.
"""

from __future__ import annotations

from typing import Any

from starlette.concurrency import run_in_threadpool

from ...server.context import Context
from ...store import LogFilter
from . import events_logs, events_media, events_points, events_scalars, mapping
from .dispatch import Call
from .envelope import BATCH_EMPTY, EVENTS_NOT_ADDED, INVALID_TASK_STATUS, ClearmlError
from .ingest import Prepared, Translator, parse_lines
from .ingest_tables import Series
from .known_tasks import KnownTasks
from .params import flag, integer, required, strings, text
from .versions import Registry


def _tasks(call: Call) -> KnownTasks:
    return call.request.app.state.clearml_tasks


def _prepare(call: Call, events: list[Any] | None) -> Prepared:
    """The events of the request (``events``, or the JSON lines of its body) checked and made tables; one trip
    to a worker thread for all of it."""
    if events is None:
        events = parse_lines(call.raw)
        if not events:
            raise ClearmlError(BATCH_EMPTY, "batch request contains no items")
    allowed = call.since("2.22")
    return Translator(call.ctx, call.caller, call.worker, model_events_allowed=allowed, tasks=_tasks(call)).run(events)


def _keep_labels(ctx: Context, tasks: KnownTasks, labels: dict[Series, str]) -> None:
    """Record the x-axis label of each series where it changed, in its task (read back with the task's
    ``last_metrics`` and the scalar histograms)."""
    by_job: dict[str, dict[tuple[str, str], str]] = {}
    for (job, metric, variant), label in tasks.new_labels(labels).items():
        by_job.setdefault(job, {})[(metric, variant)] = label
    if not by_job:
        return  # what the tasks hold already: no read
    for job_id, job in ctx.store.jobs.get_many(list(by_job)).items():
        known = mapping.clearml(job).setdefault("x_axis_labels", {})
        changed = False
        for (metric, variant), label in by_job[job_id].items():
            if known.get(metric, {}).get(variant) != label:
                known.setdefault(metric, {})[variant] = label
                changed = True
        if changed:
            ctx.store.jobs.write(job)
            ctx.access.forget_job(job_id)
        tasks.remember_labels(job_id, by_job[job_id])


async def _store(call: Call, events: list[Any] | None) -> dict[str, Any]:
    prepared = await run_in_threadpool(_prepare, call, events)
    if prepared.added:
        await call.ctx.committer.commit(prepared.tables)
        if prepared.labels:
            await run_in_threadpool(_keep_labels, call.ctx, _tasks(call), prepared.labels)
    errors = dict(prepared.errors)
    if not prepared.added:
        first = next(iter(errors), "no events")
        raise ClearmlError(EVENTS_NOT_ADDED, f"events not added: {first}", **errors)
    return {"added": prepared.added, "errors": sum(errors.values()), "errors_info": errors}


async def add(call: Call) -> dict[str, Any]:
    """``events.add``: one event, the request body itself."""
    return await _store(call, [call.data])


async def add_batch(call: Call) -> dict[str, Any]:
    """``events.add_batch``: JSON lines, one event a line; the good ones are stored, the bad ones counted."""
    return await _store(call, None)


def _check_unlocked(job: Any, allow_locked: bool, kind: str) -> None:
    if job.locked and not allow_locked:
        raise ClearmlError(
            INVALID_TASK_STATUS, f"cannot update events of a published {kind}: pass allow_locked", id=job.job
        )


def _deleted_count(call: Call, job_id: str) -> int:
    sources = ("scalar", "vector", "plot", "image", "log")
    return call.ctx.store.events.timeline_count(job_id, sources)


def delete_for_task(call: Call) -> dict[str, Any]:
    job = mapping.job_for(call.ctx, call.caller, required(call.data, "task"), "write")
    _check_unlocked(job, flag(call.data, "allow_locked"), "task")
    deleted = _deleted_count(call, job.job)
    call.ctx.store.jobs.delete_data(job.job)
    return {"deleted": deleted}


def delete_for_model(call: Call) -> dict[str, Any]:
    job = mapping.job_for(call.ctx, call.caller, required(call.data, "model"), "write", model=True)
    _check_unlocked(job, flag(call.data, "allow_locked"), "model")
    deleted = _deleted_count(call, job.job)
    call.ctx.store.jobs.delete_data(job.job)
    return {"deleted": deleted}


def clear_task_log(call: Call) -> dict[str, Any]:
    """Remove a task's log lines older than ``threshold_sec`` seconds ago (all when 0 or not given); from 2.30
    only those naming one of ``include_metrics``, or leaving those naming one of ``exclude_metrics``."""
    job = mapping.job_for(call.ctx, call.caller, required(call.data, "task"), "write")
    _check_unlocked(job, flag(call.data, "allow_locked"), "task")
    threshold = integer(call.data, "threshold_sec", minimum=0) or 0
    before = mapping.now_ms() - threshold * 1000 if threshold else None
    where = LogFilter()
    if call.since("2.30"):
        included = strings(call.data, "include_metrics")
        where = LogFilter(
            metrics=tuple((metric, ()) for metric in included or ()),
            without_metrics=tuple(strings(call.data, "exclude_metrics") or ()),
        )
    return {"deleted": call.ctx.store.logs.delete(job.job, before, where)}


def clear_scroll(call: Call) -> dict[str, Any]:
    """Scroll ids hold their whole state and expire by themselves: there is nothing to free."""
    text(call.data, "scroll_id", required_=True)
    return {}


def install(registry: Registry) -> None:
    add_ = registry.add
    add_("events.add", "2.1 2.22", add)
    add_("events.add_batch", "2.1 2.22", add_batch)
    add_("events.delete_for_task", "2.1", delete_for_task)
    add_("events.delete_for_model", "2.22", delete_for_model)
    add_("events.clear_task_log", "2.19 2.30", clear_task_log)
    add_("events.clear_scroll", "2.18", clear_scroll)
    add_("events.get_task_log", "1.5 1.7 2.9 2.30", events_logs.get_task_log)
    add_("events.download_task_log", "2.1", events_logs.download_task_log)
    add_("events.get_task_metrics", "2.7 2.22", events_scalars.get_task_metrics)
    add_("events.get_multi_task_metrics", "2.28", events_scalars.get_multi_task_metrics)
    add_("events.get_vector_metrics_and_variants", "2.1 2.22", events_scalars.get_vector_metrics_and_variants)
    add_("events.vector_metrics_iter_histogram", "2.1 2.22", events_scalars.vector_metrics_iter_histogram)
    add_("events.scalar_metrics_iter_histogram", "2.1 2.14 2.22", events_scalars.scalar_metrics_iter_histogram)
    add_(
        "events.multi_task_scalar_metrics_iter_histogram",
        "2.1 2.22 2.28",
        events_scalars.multi_task_scalar_metrics_iter_histogram,
    )
    add_("events.get_task_single_value_metrics", "2.20 2.22 2.28", events_scalars.get_task_single_value_metrics)
    add_("events.get_task_latest_scalar_values", "2.1", events_scalars.get_task_latest_scalar_values)
    add_("events.get_scalar_metrics_and_variants", "2.1 2.22", events_scalars.get_scalar_metrics_and_variants)
    add_("events.get_scalar_metric_data", "2.1 2.16 2.22", events_points.get_scalar_metric_data)
    add_("events.scalar_metrics_iter_raw", "2.16 2.22", events_points.scalar_metrics_iter_raw)
    add_("events.get_task_events", "2.1 2.22", events_media.get_task_events)
    add_("events.debug_images", "2.1 2.7 2.14 2.22", events_media.debug_images)
    add_("events.plots", "2.20 2.22", events_media.plots)
    add_("events.get_debug_image_sample", "2.12 2.20 2.22", events_media.get_debug_image_sample)
    add_("events.next_debug_image_sample", "2.12 2.22", events_media.next_debug_image_sample)
    add_("events.get_plot_sample", "2.20 2.22", events_media.get_plot_sample)
    add_("events.next_plot_sample", "2.20 2.22", events_media.next_plot_sample)
    add_("events.get_task_plots", "2.1 2.14 2.16 2.22", events_media.get_task_plots)
    add_("events.get_multi_task_plots", "2.1 2.16 2.22 2.28", events_media.get_multi_task_plots)
