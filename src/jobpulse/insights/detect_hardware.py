"""Hardware trouble of a worker or device (kind ``hardware``, one signal per cause).

- ``ecc_uncorrected`` (critical), ``ecc_corrected`` (warning), ``xid`` (critical): the error counter
  ``gpu_ecc_uncorrected``, ``gpu_ecc_corrected`` or ``gpu_xid_errors`` of a device rises (opens at once; the
  evidence of ``xid`` names the last code, ``gpu_xid``).
- ``thermal_throttle``, ``power_throttle``: ``gpu_throttle_thermal`` or ``gpu_throttle_power`` (1 while the driver
  throttles the clocks for that reason) stays positive for ``hardware_min_s``.
- ``gpu_memory``: ``gpu_mem_util`` above ``gpu_mem_high_pct`` for ``hardware_min_s``.
- ``host_memory``: a worker's ``mem_util`` (% of its cgroup limit) above ``host_mem_high_pct`` for ``hardware_min_s``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .episodes import candidates, episodes
from .frames import JobData, Matrix
from .model import Detection, max_of, number, span
from .thresholds import minutes

_COUNTERS = (
    ("gpu_ecc_uncorrected", "ecc_uncorrected", "critical"),
    ("gpu_ecc_corrected", "ecc_corrected", "warning"),
    ("gpu_xid_errors", "xid", "critical"),
)
_FLAGS = (("gpu_throttle_thermal", "thermal_throttle"), ("gpu_throttle_power", "power_throttle"))


def hardware(data: JobData, t: dict[str, Any]) -> list[Detection]:
    out: list[Detection] = []
    clear, sustained = minutes(t["resolve_after_s"]), minutes(t["hardware_min_s"])
    for metric, signal, severity in _COUNTERS:
        matrix = data.metric(metric)
        if matrix is not None:
            out += _found(data, matrix, _rising(matrix), signal, severity, 1, clear, metric)
    for metric, signal in _FLAGS:
        matrix = data.metric(metric)
        if matrix is not None:
            cond = np.nan_to_num(matrix["max"], nan=0.0) > 0
            out += _found(data, matrix, cond, signal, "warning", sustained, clear, metric, timed=True)
    for metric, signal, threshold in (
        ("gpu_mem_util", "gpu_memory", "gpu_mem_high_pct"),
        ("mem_util", "host_memory", "host_mem_high_pct"),
    ):
        matrix = data.metric(metric)
        if matrix is not None:
            with np.errstate(invalid="ignore"):
                cond = matrix["avg"] > t[threshold]
            out += _found(data, matrix, cond, signal, "warning", sustained, clear, metric, timed=True)
    return out


def _rising(matrix: Matrix) -> np.ndarray:
    """Per row and minute: whether the counter went up within the minute or since the minutes before."""
    top = np.where(np.isfinite(matrix["max"]), matrix["max"], -np.inf)
    before = np.full(top.shape, -np.inf)
    before[:, 1:] = np.maximum.accumulate(top, axis=1)[:, :-1]
    with np.errstate(invalid="ignore"):
        within = matrix["max"] > matrix["min"]
        since = np.isfinite(before) & (top > before)
    return within | since


def _found(
    data: JobData,
    matrix: Matrix,
    cond: np.ndarray,
    signal: str,
    severity: str,
    need: int,
    clear: int,
    metric: str,
    *,
    timed: bool = False,
) -> list[Detection]:
    """The detections of ``cond``; ``timed``: it must last ``need`` minutes of the job (else it opens at once)."""
    out = []
    weight = data.coverage if timed else None
    for row in candidates(cond, need):
        worker, device = matrix.keys[row]
        for episode in episodes(cond[row], min_len=need, clear_len=clear, final=data.final, weight=weight):
            started, ended = span(data, episode)
            lo, hi = episode.first, episode.last + 1
            evidence: dict[str, Any] = {"metric": metric, "max": max_of(matrix["max"][row, lo:hi])}
            if signal in ("ecc_uncorrected", "ecc_corrected", "xid"):
                evidence["increase"] = _increase(matrix, row, lo, hi)
            if signal == "xid":
                codes = data.metric("gpu_xid")
                evidence["last_code"] = _last_code(codes, worker, device, hi) if codes is not None else None
            out.append(Detection("hardware", signal, severity, worker, device, started, ended, evidence))
    return out


def _increase(matrix: Matrix, row: int, lo: int, hi: int) -> float | None:
    """How much a counter rose over minutes [lo, hi): from its last value before (else its first within)."""
    before = matrix["max"][row, :lo]
    before = before[np.isfinite(before)]
    base = before[-1] if before.size else matrix["min"][row, lo]
    return number(np.nanmax(matrix["max"][row, lo:hi]) - base) if np.isfinite(base) else None


def _last_code(codes: Matrix, worker: str, device: str, until: int) -> int | None:
    if (worker, device) not in codes.keys:
        return None
    values = codes["max"][codes.keys.index((worker, device)), :until]
    finite = values[np.isfinite(values)]
    return int(finite[-1]) if finite.size else None
