"""Progress of a job: hangs, lost workers and diverging scalars.

Definitions (durations from ``thresholds.py``):

- **hang**: a running job that reported steps or log lines before, then for ``hang_min_s`` reports no scalar point
  and no log line while its GPUs report a mean utilization at or under ``hang_idle_util_pct`` (stalled) or at or
  over ``hang_busy_util_pct`` (spinning: a collective waiting on a peer), after the warm-up.
- **lost_worker**: a worker that reported (system samples, scalars or logs) and has not ended goes silent for
  ``lost_after_s`` while another worker of the job goes on reporting.
- **divergence**: a scalar point that is NaN or infinite (opens at once), or, for metrics named in
  ``spike_metrics``, a minute whose largest value is above ``spike_factor`` times the rolling median of the
  minutes' medians over the ``spike_window_s`` before it (at least three minutes of it), after the warm-up.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from .episodes import candidates, episodes
from .frames import MINUTE_MS, JobData
from .model import Detection, max_of, mean_of, nanmedian, number, span
from .thresholds import minutes

ENDED = ("completed", "failed", "stopped")


def _any_per_minute(matrix: np.ndarray) -> np.ndarray:
    """Per minute, whether any row has a positive value."""
    if matrix.size == 0:
        return np.zeros(matrix.shape[1], dtype=bool)
    return (np.nan_to_num(matrix, nan=0.0) > 0).any(axis=0)


def hang(data: JobData, t: dict[str, Any]) -> list[Detection]:
    util = data.metric("gpu_util")
    if util is None or data.first_progress is None:
        return []
    steps = _any_per_minute(data.steps["points"]) if data.steps is not None else np.zeros(data.minutes, bool)
    lines = _any_per_minute(data.logs["lines"]) if data.logs is not None else np.zeros(data.minutes, bool)
    with warnings.catch_warnings(action="ignore", category=RuntimeWarning):
        mean = np.nanmean(util["avg"], axis=0)
    pinned = (mean <= t["hang_idle_util_pct"]) | (mean >= t["hang_busy_util_pct"])
    after = data.after(data.started + t["warmup_s"] * 1000) & (data.times > data.first_progress)
    cond = ~steps & ~lines & np.isfinite(mean) & pinned & after
    out = []
    need, clear = minutes(t["hang_min_s"]), minutes(t["resolve_after_s"])
    for episode in episodes(cond, min_len=need, clear_len=clear, final=data.final, weight=data.coverage):
        started, ended = span(data, episode)
        values = mean[episode.first : episode.last + 1]
        evidence = {
            "state": "spinning" if nanmedian(values) >= t["hang_busy_util_pct"] else "stalled",
            "mean_util_pct": mean_of(values),
            "minutes_without_progress": episode.last - episode.first + 1,
            "last_step": _last_before(data.times, steps, episode.first),
            "last_log": _last_before(data.times, lines, episode.first),
        }
        out.append(Detection("hang", "", "critical", "", "", started, ended, evidence))
    return out


def _last_before(times: np.ndarray, present: np.ndarray, index: int) -> int | None:
    """The end of the last minute before ``index`` in which ``present`` holds (ms), if any in the window."""
    seen = np.flatnonzero(present[:index])
    return int(times[seen[-1]]) + MINUTE_MS if seen.size else None


def _presence(data: JobData, workers: list[str]) -> np.ndarray:
    """Per worker and minute: whether it reported anything."""
    index = {w: i for i, w in enumerate(workers)}
    present = np.zeros((len(workers), data.minutes), dtype=bool)
    sources = [(m.keys, m["avg"]) for m in data.system.values() if m.keys]
    if data.steps is not None:
        sources.append((data.steps.keys, data.steps["points"]))
    if data.logs is not None:
        sources.append((data.logs.keys, data.logs["lines"]))
    for keys, values in sources:
        for row, (worker, _) in enumerate(keys):
            if worker in index:
                present[index[worker]] |= np.isfinite(values[row])
    return present


def lost_worker(data: JobData, t: dict[str, Any]) -> list[Detection]:
    workers = sorted(w for w, (status, _) in data.workers.items() if status not in ENDED)
    if len(workers) < 2:
        return []
    present = _presence(data, workers)
    reporting = present.sum(axis=0)
    others = (reporting - present) > 0  # broadcasts: other workers reporting in that minute
    seen = np.array([data.times >= (data.workers[w][1] or 0) for w in workers])
    cond = ~present & others & seen
    need, clear = minutes(t["lost_after_s"]), minutes(t["resolve_after_s"])
    out = []
    for row in candidates(cond, need):
        for episode in episodes(cond[row], min_len=need, clear_len=clear, final=data.final, weight=data.coverage):
            started, ended = span(data, episode)
            evidence = {
                "silent_minutes": episode.last - episode.first + 1,
                "last_seen": _last_before(data.times, present[row], episode.first),
                "workers_reporting": int(reporting[episode.last]),
            }
            out.append(Detection("lost_worker", "", "critical", workers[row], "", started, ended, evidence))
    return out


def divergence(data: JobData, t: dict[str, Any]) -> list[Detection]:
    scalars = data.scalars
    if scalars is None or not scalars.keys:
        return []
    clear = minutes(t["resolve_after_s"])
    out = []
    bad = np.nan_to_num(scalars["bad"], nan=0.0) > 0
    for row in candidates(bad, 1):
        metric, variant = scalars.keys[row]
        for episode in episodes(bad[row], min_len=1, clear_len=clear, final=data.final):
            started, ended = span(data, episode)
            count = int(np.nansum(scalars["bad"][row, episode.first : episode.last + 1]))
            evidence = {"reason": "non_finite", "metric": metric, "variant": variant, "points": count}
            out.append(
                Detection("divergence", f"non_finite:{metric}/{variant}", "critical", "", "", started, ended, evidence)
            )
    out += _spikes(data, t, clear)
    return out


def _spikes(data: JobData, t: dict[str, Any], clear: int) -> list[Detection]:
    scalars = data.scalars
    assert scalars is not None
    rows = [i for i, (metric, _) in enumerate(scalars.keys) if any(part in metric for part in t["spike_metrics"])]
    if not rows:
        return []
    reference = _reference(scalars["mid"][rows], minutes(t["spike_window_s"]))
    top = scalars["top"][rows]
    with np.errstate(invalid="ignore"):
        cond = (top > t["spike_factor"] * reference) & (reference > 0) & data.after(data.started + t["warmup_s"] * 1000)
    out = []
    for k in candidates(cond, 1):
        metric, variant = scalars.keys[rows[k]]
        for episode in episodes(cond[k], min_len=1, clear_len=clear, final=data.final):
            started, ended = span(data, episode)
            evidence = {
                "reason": "spike",
                "metric": metric,
                "variant": variant,
                "max_value": max_of(top[k, episode.first : episode.last + 1]),
                "rolling_median": number(reference[k, episode.first], 6),
                "factor": t["spike_factor"],
            }
            out.append(
                Detection("divergence", f"spike:{metric}/{variant}", "warning", "", "", started, ended, evidence)
            )
    return out


def _reference(medians: np.ndarray, window: int) -> np.ndarray:
    """Per row and minute, the median of the minutes' medians over the ``window`` minutes before it; NaN with fewer
    than three of them."""
    padded = np.concatenate((np.full((medians.shape[0], window), np.nan), medians), axis=1)
    before = sliding_window_view(padded, window, axis=1)[:, : medians.shape[1]]  # [r, m]: the minutes before m
    enough = np.isfinite(before).sum(axis=2) >= 3
    return np.where(enough, nanmedian(before, axis=2), np.nan)
