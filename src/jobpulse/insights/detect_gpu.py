"""GPU use: idle GPUs, an underused job (with its likely cause) and stragglers (by step rate or GPU utilization).

Definitions (minutes are per-minute means of the samples; durations from ``thresholds.py``):

- **idle_gpu**: a device that reports ``gpu_util`` (the agent samples only the job's devices) averages under
  ``idle_util_pct`` for ``idle_min_s`` in a row, after the job's warm-up.
- **underused**: the median of the per-minute utilization of all the job's devices over the last
  ``underused_window_s`` is under ``underused_util_pct``. A cause is named where the data shows it in a minute the
  job was underused, its metric's median over the same window at or over its threshold: ``input_bound``
  (``cpu_util`` at or over ``input_bound_cpu_pct``), ``gpu_memory_full`` (``gpu_mem_util`` at or over
  ``gpu_mem_full_pct``), ``io_wait`` (``cpu_iowait`` at or over ``io_wait_pct``). The evidence gives each cause's
  span and median (``cause_evidence``): an episode can change character (a job input-bound for an hour, then
  hung), and a median over the whole episode would hide a cause that held for part of it.
- **straggler**: with two or more workers, a worker whose step rate (iterations per minute, from the highest
  iteration of the scalars it reports) or mean GPU utilization stays more than ``straggler_gap_pct`` below the
  median of the workers for ``straggler_min_s``; the evidence ranks the workers (min / median / max, the worst).
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from .episodes import Episode, candidates, episodes
from .frames import MINUTE_MS, JobData
from .model import Detection, mean_of, median_of, nanmedian, number, span
from .thresholds import minutes


def idle_gpu(data: JobData, t: dict[str, Any]) -> list[Detection]:
    util = data.metric("gpu_util")
    if util is None:
        return []
    cond = (util["avg"] < t["idle_util_pct"]) & data.after(data.started + t["warmup_s"] * 1000)
    need, clear = minutes(t["idle_min_s"]), minutes(t["resolve_after_s"])
    out = []
    for row in candidates(cond, need):
        worker, device = util.keys[row]
        for episode in episodes(cond[row], min_len=need, clear_len=clear, final=data.final, weight=data.coverage):
            started, ended = span(data, episode)
            values = util["avg"][row, episode.first : episode.last + 1]
            evidence = {
                "mean_util_pct": mean_of(values),
                "max_util_pct": number(np.nanmax(util["max"][row, episode.first : episode.last + 1])),
                "minutes": episode.last - episode.first + 1,
                "threshold_pct": t["idle_util_pct"],
            }
            out.append(Detection("idle_gpu", "", "warning", worker, device, started, ended, evidence))
    return out


def _rolling_median(values: np.ndarray, window: int) -> np.ndarray:
    """Per minute, the median of every finite value of ``values`` (rows x minutes) over the ``window`` minutes
    ending there; NaN where fewer than half of those minutes hold a value or the window is not full."""
    out = np.full(values.shape[1], np.nan)
    if values.shape[1] < window or values.shape[0] == 0:
        return out
    windows = sliding_window_view(values, window, axis=1)  # rows x (minutes - window + 1) x window
    stacked = windows.transpose(1, 0, 2).reshape(windows.shape[1], -1)
    present = np.isfinite(windows).any(axis=0).sum(axis=1)
    medians = nanmedian(stacked, axis=1)
    medians[present * 2 < window] = np.nan
    out[window - 1 :] = medians
    return out


def underused(data: JobData, t: dict[str, Any]) -> list[Detection]:
    util = data.metric("gpu_util")
    if util is None:
        return []
    window = minutes(t["underused_window_s"])
    median = _rolling_median(util["avg"], window)
    settled = data.after(data.started + t["warmup_s"] * 1000 + (window - 1) * MINUTE_MS)
    cond = (median < t["underused_util_pct"]) & settled
    out = []
    clear = minutes(t["resolve_after_s"])
    for episode in episodes(cond, min_len=1, clear_len=clear, final=data.final, weight=data.coverage):
        started, ended = span(data, episode, lead=window - 1)
        lo, hi = max(0, episode.first - window + 1), episode.last + 1
        evidence = {"median_util_pct": median_of(util["avg"][:, lo:hi]), "threshold_pct": t["underused_util_pct"]}
        underused_then = np.zeros_like(cond)
        underused_then[episode.first : episode.last + 1] = cond[episode.first : episode.last + 1]
        evidence.update(_causes(data, t, underused_then, window, (lo, hi)))
        out.append(Detection("underused", "", "warning", "", "", started, ended, evidence))
    return out


def _causes(
    data: JobData, t: dict[str, Any], underused_then: np.ndarray, window: int, whole: tuple[int, int]
) -> dict[str, Any]:
    """What the data shows about why the GPUs wait: each metric's median over minutes ``whole`` (the episode and the
    window before it), and each cause whose metric's rolling median held in a minute of ``underused_then``, with
    the median over the minutes it held and their span (``cause_evidence``)."""
    found: dict[str, Any] = {"causes": [], "cause_evidence": {}}
    for metric, threshold, cause in (
        ("cpu_util", "input_bound_cpu_pct", "input_bound"),
        ("gpu_mem_util", "gpu_mem_full_pct", "gpu_memory_full"),
        ("cpu_iowait", "io_wait_pct", "io_wait"),
    ):
        matrix = data.metric(metric)
        found[f"median_{metric}_pct"] = None
        if matrix is None:
            continue
        found[f"median_{metric}_pct"] = median_of(matrix["avg"][:, whole[0] : whole[1]])
        rolling = _rolling_median(matrix["avg"], window)
        with np.errstate(invalid="ignore"):
            held = underused_then & (rolling >= t[threshold])
        if not held.any():
            continue
        started, ended = _saturated_span(data, matrix["avg"], t[threshold], np.flatnonzero(held), window)
        found["causes"].append(cause)
        found["cause_evidence"][cause] = {
            "metric": metric,
            "median_pct": number(np.median(rolling[held])),
            "threshold_pct": t[threshold],
            "started": started,
            "ended": ended,
        }
    return found


def _saturated_span(
    data: JobData, values: np.ndarray, threshold: float, held: np.ndarray, window: int
) -> tuple[int, int | None]:
    """The span of the minutes whose own median (over rows) was at or over ``threshold``, among those the rolling
    medians of minutes ``held`` looked back over: when the cause began and ended, not when its median crossed."""
    lo, hi = max(0, int(held[0]) - window + 1), int(held[-1]) + 1
    per_minute = nanmedian(values[:, lo:hi], axis=0)
    with np.errstate(invalid="ignore"):
        saturated = np.flatnonzero(per_minute >= threshold) + lo
    first, last = (int(saturated[0]), int(saturated[-1])) if saturated.size else (int(held[0]), int(held[-1]))
    return span(data, Episode(first, last, False))


def straggler(data: JobData, t: dict[str, Any]) -> list[Detection]:
    out = []
    util = data.metric("gpu_util")
    if util is not None:
        workers, per_worker = util.by_worker("avg")
        out += _stragglers(data, t, "gpu_util", workers, per_worker, floor=t["idle_util_pct"])
    if data.steps is not None and data.steps.keys:
        named = [i for i, (worker, _) in enumerate(data.steps.keys) if worker]
        workers = [data.steps.keys[i][0] for i in named]
        out += _stragglers(data, t, "step_rate", workers, _step_rates(data.steps["top"][named]), floor=0.0)
    return out


def _step_rates(top: np.ndarray) -> np.ndarray:
    """Iterations per minute of each worker: how far its highest iteration reported advanced since the minute
    before (NaN before its first report and in minutes it reported nothing)."""
    filled = np.where(np.isfinite(top), top, -np.inf)
    reached = np.maximum.accumulate(filled, axis=1)
    rates = np.full(top.shape, np.nan)
    with np.errstate(invalid="ignore"):
        advance = reached[:, 1:] - reached[:, :-1]
    ok = np.isfinite(reached[:, :-1]) & np.isfinite(top[:, 1:])
    rates[:, 1:] = np.where(ok, advance, np.nan)
    return rates


def _stragglers(
    data: JobData, t: dict[str, Any], signal: str, workers: list[str], values: np.ndarray, *, floor: float
) -> list[Detection]:
    if len(workers) < 2:
        return []
    median = nanmedian(values, axis=0)
    gap = 1 - t["straggler_gap_pct"] / 100
    settled = data.after(data.started + t["warmup_s"] * 1000)
    cond = (values < gap * median) & (median > floor) & settled
    need, clear = minutes(t["straggler_min_s"]), minutes(t["resolve_after_s"])
    out = []
    for row in candidates(cond, need):
        for episode in episodes(cond[row], min_len=need, clear_len=clear, final=data.final, weight=data.coverage):
            started, ended = span(data, episode)
            lo, hi = episode.first, episode.last + 1
            evidence = {"basis": signal, **_ranking(workers, values[:, lo:hi], row, t["straggler_worst"])}
            evidence["unit"] = "iterations/min" if signal == "step_rate" else "%"
            out.append(Detection("straggler", signal, "warning", workers[row], "", started, ended, evidence))
    return out


def _ranking(workers: list[str], values: np.ndarray, row: int, worst: int) -> dict[str, Any]:
    """Each worker's mean over the span, ranked: the worker's own, the min / median / max, the slowest few."""
    with np.errstate(all="ignore"), warnings.catch_warnings(action="ignore", category=RuntimeWarning):
        means = np.nanmean(values, axis=1)
    order = [i for i in np.argsort(means) if np.isfinite(means[i])]
    finite = means[np.isfinite(means)]
    return {
        "value": number(means[row]),
        "min": number(finite.min()) if finite.size else None,
        "median": number(np.median(finite)) if finite.size else None,
        "max": number(finite.max()) if finite.size else None,
        "worst": [{"worker": workers[i], "value": number(means[i])} for i in order[:worst]],
    }
