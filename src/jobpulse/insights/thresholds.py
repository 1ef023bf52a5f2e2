"""The detectors' thresholds: one table of name, default, bounds and meaning; a project may change any of them.

Durations are in seconds and are applied in whole minutes (rounded up): detectors read per-minute summaries.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from ..errors import BadRequest

KINDS = ("idle_gpu", "underused", "straggler", "hang", "divergence", "hardware", "lost_worker")


@dataclass(frozen=True)
class Threshold:
    name: str
    default: Any
    help: str
    minimum: float | None = None
    maximum: float | None = None


TABLE: tuple[Threshold, ...] = (
    Threshold(
        "warmup_s", 300, "seconds after a job starts in which idle, underused, straggler and hang stay silent", 0, 86400
    ),
    Threshold("resolve_after_s", 180, "a condition must be clear this long before its finding resolves", 60, 86400),
    Threshold("idle_util_pct", 5.0, "an allocated GPU under this utilization (%) is idle", 0, 100),
    Threshold("idle_min_s", 300, "how long a GPU must stay idle", 60, 86400),
    Threshold("underused_util_pct", 50.0, "the job's median GPU utilization (%) under which it is underused", 0, 100),
    Threshold("underused_window_s", 600, "the window the median utilization is taken over", 60, 86400),
    Threshold(
        "input_bound_cpu_pct", 90.0, "CPU utilization (% of the limit) that makes an underused job input-bound", 0, 100
    ),
    Threshold("gpu_mem_full_pct", 90.0, "GPU memory utilization (%) named as a cause of underuse", 0, 100),
    Threshold(
        "io_wait_pct", 20.0, "CPU time waiting on I/O (%, metric cpu_iowait) named as a cause of underuse", 0, 100
    ),
    Threshold(
        "straggler_gap_pct",
        20.0,
        "how far (%) below the job's median a worker's step rate or GPU utilization must be",
        1,
        100,
    ),
    Threshold("straggler_min_s", 300, "how long a worker must stay behind", 60, 86400),
    Threshold("straggler_worst", 3, "how many of the slowest workers a straggler finding names", 1, 100),
    Threshold("hang_min_s", 600, "how long a job must go without a step or a log line", 60, 86400),
    Threshold(
        "hang_idle_util_pct", 2.0, "GPU utilization (%) at or under which a job without progress is stalled", 0, 100
    ),
    Threshold(
        "hang_busy_util_pct", 98.0, "GPU utilization (%) at or over which a job without progress is spinning", 0, 100
    ),
    Threshold("spike_factor", 10.0, "a value above this many times its rolling median is a spike", 1.5, 1e9),
    Threshold("spike_window_s", 600, "the window of the rolling median a spike is measured against", 180, 86400),
    Threshold(
        "spike_metrics",
        ["loss"],
        "scalar metrics (by part of their name) checked for spikes; NaN/Inf is checked on all",
    ),
    Threshold("hardware_min_s", 120, "how long throttling or near-full memory must last", 60, 86400),
    Threshold("gpu_mem_high_pct", 95.0, "GPU memory utilization (%) over which a device is near full", 0, 100),
    Threshold(
        "host_mem_high_pct",
        95.0,
        "host memory utilization (% of the cgroup limit) over which a worker is near its limit",
        0,
        100,
    ),
    Threshold("lost_after_s", 180, "how long a worker must be silent while others report", 60, 86400),
    Threshold("disabled", [], f"kinds of finding not to look for, of: {', '.join(KINDS)}"),
)
DEFAULTS: dict[str, Any] = {t.name: t.default for t in TABLE}
_BY_NAME = {t.name: t for t in TABLE}


def minutes(seconds: float) -> int:
    """A duration in whole minutes, rounded up, at least one."""
    return max(1, math.ceil(seconds / 60))


def effective(overrides: dict[str, Any] | None) -> dict[str, Any]:
    """The defaults with a project's ``overrides`` applied (names no longer in the table are left out)."""
    return {**DEFAULTS, **{k: v for k, v in (overrides or {}).items() if k in _BY_NAME}}


def check(changes: dict[str, Any]) -> dict[str, Any]:
    """``changes`` if every entry names a threshold and holds a value it allows or None (which restores its
    default); BadRequest naming it otherwise."""
    out: dict[str, Any] = {}
    for name, value in changes.items():
        threshold = _BY_NAME.get(name)
        if threshold is None:
            raise BadRequest(f"unknown threshold {name!r}; known: {', '.join(_BY_NAME)}", field=name)
        out[name] = None if value is None else _checked(threshold, value)
    return out


def _checked(threshold: Threshold, value: Any) -> Any:
    name = threshold.name
    if isinstance(threshold.default, list):
        if not isinstance(value, list) or not all(isinstance(v, str) and 0 < len(v) <= 255 for v in value):
            raise BadRequest(f"'{name}' must be a list of strings of 1-255 characters", field=name)
        if name == "disabled" and any(v not in KINDS for v in value):
            raise BadRequest(f"'disabled' may hold only {', '.join(KINDS)}", field=name)
        return value
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise BadRequest(f"'{name}' must be a number", field=name)
    if isinstance(threshold.default, int) and not float(value).is_integer():
        raise BadRequest(f"'{name}' must be a whole number", field=name)
    low, high = threshold.minimum, threshold.maximum
    if (low is not None and value < low) or (high is not None and value > high):
        raise BadRequest(f"'{name}' must be between {low:g} and {high:g}, got {value!r}", field=name)
    return int(value) if isinstance(threshold.default, int) else float(value)


def describe() -> list[dict[str, Any]]:
    """The table, for the API and the UI."""
    return [{"name": t.name, "default": t.default, "help": t.help, "min": t.minimum, "max": t.maximum} for t in TABLE]
