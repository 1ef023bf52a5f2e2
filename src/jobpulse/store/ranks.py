"""Which workers' series a scalar read answers: each worker (rank) of a job reports series of its own.

A scalar series is (job, metric, variant, worker): a rank's point never replaces another rank's point of the
same iteration. Reads show one series per job, metric and variant by default, the **leader**'s. The leader of a
series is, among the workers that reported it:

1. the job's ``leader`` field, where that worker reported the series;
2. else ``worker-0``, where it reported the series;
3. else the worker whose first point of the series has the earliest time (of equal times, the first by name).

A series reported by one worker (a job of one worker, every ClearML task) has that worker as its leader, and reads
as it did before workers had series of their own.

A chart shows, by its ``workers`` mode: ``leader`` (one series per job and variant), ``all`` (one series per job,
variant and worker) or ``envelope`` (per job, variant and bucket, the minimum, median and maximum across workers
of their bucket means, and how many workers the bucket holds). ``worker`` names one worker to read instead of the
leader.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ..errors import BadRequest

Series = tuple[str, str, str, str]  # job, metric, variant, worker
Extent = list[int]  # first iteration, last iteration, first time, last time (epoch ms)
WORKER_MODES = ("leader", "all", "envelope")
LATEST_MODES = ("leader", "all")
JobLeaders = Callable[[list[str]], dict[str, str]]  # job -> its ``leader`` field ("" where unset)


def check_mode(mode: str, modes: tuple[str, ...] = WORKER_MODES) -> str:
    """``mode`` where it is one of ``modes``; else a 400 naming the field ``workers``."""
    if mode not in modes:
        raise BadRequest(f"'workers' must be one of {', '.join(modes)}", field="workers")
    return mode


def check_worker(worker: str | None) -> str | None:
    """A worker named by a query (None or "": none); a 400 naming the field ``worker`` if it is too long."""
    if worker is None or worker == "":
        return None
    if len(worker) > 256:
        raise BadRequest("'worker' must be at most 256 characters", field="worker")
    return worker


def leader(first_ms: dict[str, int], named: str) -> str:
    """The leader among the workers of one series (``first_ms``: worker -> time of its first point), given the
    job's ``leader`` field ``named`` (see the module's rule)."""
    if named and named in first_ms:
        return named
    if "worker-0" in first_ms:
        return "worker-0"
    return min(first_ms, key=lambda worker: (first_ms[worker], worker))


def leaders(parts: dict[Series, Extent], job_leaders: JobLeaders | None) -> dict[tuple[str, str, str], str]:
    """The leader of each (job, metric, variant) of ``parts`` (series -> extent); the jobs' ``leader`` fields are
    looked up (``job_leaders``) only for jobs that have a series of several workers."""
    by_series: dict[tuple[str, str, str], dict[str, int]] = {}
    for (job, metric, variant, worker), extent in parts.items():
        by_series.setdefault((job, metric, variant), {})[worker] = extent[2]
    return leaders_of(by_series, job_leaders)


def leaders_of(
    first_ms: dict[tuple[str, str, str], dict[str, int]], job_leaders: JobLeaders | None
) -> dict[tuple[str, str, str], str]:
    """The leader of each (job, metric, variant) of ``first_ms`` (its workers -> time of their first point); the
    jobs' ``leader`` fields are looked up (``job_leaders``) only for jobs that have a series of several workers."""
    shared = sorted({key[0] for key, workers in first_ms.items() if len(workers) > 1})
    named = job_leaders(shared) if shared and job_leaders is not None else {}
    return {key: leader(workers, named.get(key[0], "")) for key, workers in first_ms.items()}


def chosen(parts: dict[Series, Extent], mode: str, worker: str | None, job_leaders: JobLeaders | None) -> set[Series]:
    """The series of ``parts`` a read in ``mode`` shows: those of ``worker`` where one is named, every one for
    ``all`` and ``envelope``, else the leader's of each job, metric and variant."""
    if worker is not None:
        return {series for series in parts if series[3] == worker}
    if mode != "leader":
        return set(parts)
    return {(*key, name) for key, name in leaders(parts, job_leaders).items()}


def extent_of(parts: dict[Series, Extent], series: set[Series], axis: str) -> tuple[int, int] | None:
    """The x extent (``axis`` iter or time) of the ``series`` among ``parts``; None where there are none."""
    lo, hi = (0, 1) if axis == "iter" else (2, 3)
    found = [parts[s] for s in series if s in parts]
    if not found:
        return None
    return min(e[lo] for e in found), max(e[hi] for e in found)


def envelope(series: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per (job, variant) of the per-worker chart ``series`` (each with ``x`` and ``mean`` per bucket): per bucket
    the ``min``, ``median`` and ``max`` across workers of their means (workers without a finite value in the bucket
    left out) and ``workers``, how many workers have one; buckets where none has are left out."""
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for one in series:
        groups.setdefault((one["job"], one["variant"]), []).append(one)
    return [_envelope_of(job, variant, members) for (job, variant), members in groups.items()]


def _envelope_of(job: str, variant: str, members: list[dict[str, Any]]) -> dict[str, Any]:
    xs = np.unique(np.concatenate([np.asarray(m["x"], dtype=np.int64) for m in members]))
    grid = np.full((len(members), len(xs)), np.nan)
    for row, member in enumerate(members):
        means = np.array([np.nan if v is None else v for v in member["mean"]], dtype=np.float64)
        grid[row, np.searchsorted(xs, np.asarray(member["x"], dtype=np.int64))] = means
    grid[~np.isfinite(grid)] = np.nan
    held = np.sum(~np.isnan(grid), axis=0)
    keep = held > 0
    grid, xs, held = grid[:, keep], xs[keep], held[keep]
    return {
        "job": job,
        "variant": variant,
        "x": xs.tolist(),
        "min": np.nanmin(grid, axis=0).tolist() if len(xs) else [],
        "median": np.nanmedian(grid, axis=0).tolist() if len(xs) else [],
        "max": np.nanmax(grid, axis=0).tolist() if len(xs) else [],
        "workers": held.tolist(),
    }
