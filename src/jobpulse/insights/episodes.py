"""Episodes of a condition over the minutes of a window, with minimum durations and hysteresis.

A condition is a boolean per minute. A run of it opens an episode only once it has lasted ``min_len`` minutes;
an open episode goes on through later runs separated by fewer than ``clear_len`` clear minutes (a checkpoint
pause, a brief recovery), and ends only after ``clear_len`` clear minutes. So a condition that flickers shorter
than ``min_len`` never opens anything, and one that flickers while open neither resolves nor opens again.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Episode:
    first: int  # index of the first minute of the condition
    last: int  # index of its last minute
    active: bool  # still holding at the end of the window (or not yet clear for long enough)


def runs(cond: np.ndarray) -> list[tuple[int, int]]:
    """The runs of true values of ``cond`` as (first, last) indices."""
    padded = np.concatenate(([False], cond.astype(bool), [False]))
    edges = np.flatnonzero(padded[1:] != padded[:-1])
    return [(int(a), int(b) - 1) for a, b in zip(edges[::2], edges[1::2], strict=True)]


def episodes(
    cond: np.ndarray, *, min_len: int, clear_len: int, final: bool = False, weight: np.ndarray | None = None
) -> list[Episode]:
    """The episodes of ``cond``; with ``final`` (the job has ended) none is active. With ``weight`` (per minute, the
    share of it that counts: ``JobData.coverage``) a run's length is the sum of its minutes' weights."""
    found: list[list[int]] = []
    for first, last in runs(cond):
        length = last - first + 1 if weight is None else float(weight[first : last + 1].sum())
        if found and first - found[-1][1] - 1 < clear_len:
            found[-1][1] = last
        elif length >= min_len - 1e-9:
            found.append([first, last])
    end = len(cond) - 1
    return [Episode(a, b, not final and end - b < clear_len) for a, b in found]


def candidates(cond: np.ndarray, min_len: int) -> np.ndarray:
    """Indices of the rows of a condition matrix that hold at least ``min_len`` true minutes: only those can have
    an episode, so the others are skipped without a look at their runs."""
    if cond.size == 0:
        return np.zeros(0, dtype=np.int64)
    return np.flatnonzero(cond.sum(axis=1) >= min_len)
