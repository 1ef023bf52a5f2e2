"""What a detector answers (a ``Detection``), and the documented kinds of finding."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .episodes import Episode
from .frames import MINUTE_MS, JobData


@dataclass
class Detection:
    """A condition a detector sees in a job's data: from ``started`` to ``ended`` (None: it still holds)."""

    kind: str
    signal: str
    severity: str
    worker: str
    device: str
    started: int
    ended: int | None
    evidence: dict[str, Any] = field(default_factory=dict)

    @property
    def key(self) -> tuple[str, str, str, str]:
        return self.kind, self.signal, self.worker, self.device


def span(data: JobData, episode: Episode, lead: int = 0) -> tuple[int, int | None]:
    """(started, ended) of ``episode`` in ms; ``lead`` minutes before its first are part of it (the window a
    rolling statistic looked back over). A condition of the minute the job started in begins when the job did, not
    at the minute's start: a job started 40 s into a minute was not idle in the 40 s before it ran."""
    started = int(data.times[max(0, episode.first - lead)])
    if started < data.started < started + MINUTE_MS:
        started = data.started
    if episode.active:
        return started, None
    ended = int(data.times[episode.last]) + MINUTE_MS
    return started, min(ended, data.now_ms)


def continued_evidence(before: dict[str, Any], now: dict[str, Any]) -> dict[str, Any]:
    """The evidence of a finding that a later evaluation continues: the later one's, keeping the causes earlier
    evaluations named that it can no longer see (a running job is evaluated over its last minutes only), each
    cause's start the earliest seen."""
    earlier = before.get("cause_evidence") or {}
    if not earlier:
        return now
    causes = dict(earlier)
    for cause, seen in (now.get("cause_evidence") or {}).items():
        old = causes.get(cause)
        causes[cause] = seen if old is None else {**seen, "started": min(old["started"], seen["started"])}
    return {**now, "causes": list(causes), "cause_evidence": causes}


def number(value: float | np.floating | None, digits: int = 2) -> float | None:
    """A finite value rounded for evidence; None for NaN or nothing."""
    if value is None or not np.isfinite(value):
        return None
    return round(float(value), digits)


def nanmedian(values: np.ndarray, axis: int = -1) -> np.ndarray:
    """The median along ``axis`` of the values that are not NaN (NaN where there is none): numpy's ``nanmedian``
    without its per-row fallbacks, which cost more than the detectors themselves."""
    ordered = np.sort(np.moveaxis(values, axis, -1), axis=-1)  # NaN sort last
    count = (~np.isnan(ordered)).sum(axis=-1)
    low = np.take_along_axis(ordered, np.maximum((count - 1) // 2, 0)[..., None], -1)[..., 0]
    high = np.take_along_axis(ordered, np.maximum(count // 2, 0)[..., None], -1)[..., 0]
    return np.where(count > 0, (low + high) / 2, np.nan)


def mean_of(values: np.ndarray) -> float | None:
    finite = values[np.isfinite(values)]
    return number(finite.mean()) if finite.size else None


def max_of(values: np.ndarray) -> float | None:
    finite = values[np.isfinite(values)]
    return number(finite.max()) if finite.size else None


def median_of(values: np.ndarray) -> float | None:
    finite = values[np.isfinite(values)]
    return number(np.median(finite)) if finite.size else None
