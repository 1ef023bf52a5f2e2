"""GPU waste: GPU-hours idle and underused per job and per project over a period, from the per-minute rollup.

A device-minute is *idle* when its mean ``gpu_util`` is under the project's ``idle_util_pct``, *underused* when it
is at or over that and under ``underused_util_pct``. ``unused_gpu_hours`` weighs every device-minute by the share of
the GPU it left unused ((100 - utilization) / 100), so it counts partial waste too.
"""

from __future__ import annotations

from typing import Any

from ..store import Store
from .thresholds import effective


def _hours(minutes: float) -> float:
    return round(minutes / 60, 3)


def _row(row: dict[str, Any]) -> dict[str, Any]:
    return {
        "job": row["job"],
        "gpu_hours": _hours(row["minutes"]),
        "idle_gpu_hours": _hours(row["idle"]),
        "underused_gpu_hours": _hours(row["underused"]),
        "unused_gpu_hours": _hours(row["unused"]),
    }


def job_waste(store: Store, job: str, project: str, start_ms: int, end_ms: int) -> dict[str, Any]:
    t = effective(store.insight_config.thresholds([project]).get(project))
    rows = store.insight_data.gpu_minutes([job], None, start_ms, end_ms, t["idle_util_pct"], t["underused_util_pct"])
    found = _row(rows[0]) if rows else _row({"job": job, "minutes": 0, "idle": 0, "underused": 0, "unused": 0.0})
    return {**found, "start": start_ms, "end": end_ms, "thresholds": _used(t)}


def project_waste(store: Store, project: str, start_ms: int, end_ms: int, limit: int = 100) -> dict[str, Any]:
    t = effective(store.insight_config.thresholds([project]).get(project))
    rows = store.insight_data.gpu_minutes(None, project, start_ms, end_ms, t["idle_util_pct"], t["underused_util_pct"])
    jobs = sorted((_row(r) for r in rows), key=lambda r: (-(r["idle_gpu_hours"] + r["underused_gpu_hours"]), r["job"]))
    totals = {
        name: round(sum(j[name] for j in jobs), 3)
        for name in ("gpu_hours", "idle_gpu_hours", "underused_gpu_hours", "unused_gpu_hours")
    }
    return {
        "project": project,
        "start": start_ms,
        "end": end_ms,
        **totals,
        "jobs": jobs[:limit],
        "thresholds": _used(t),
    }


def _used(t: dict[str, Any]) -> dict[str, Any]:
    return {"idle_util_pct": t["idle_util_pct"], "underused_util_pct": t["underused_util_pct"]}
