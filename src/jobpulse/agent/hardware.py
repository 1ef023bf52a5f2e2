"""What a worker runs on, reported once when the agent starts: the job's instance type.

The summary comes from the first tick whose samples carry the worker's limits (``cpu_limit_cores`` and
``mem_limit_bytes``: the container's cgroup limits, else the machine's CPUs and memory) and from the job's
accelerators: their model as NVML or ``npu-smi`` names it, their count, and the memory of the largest (MIB of
``gpu_mem_total_bytes`` or ``npu_mem_total_bytes``). It is sent as the ``instance_type`` of the job's
registration, which the server keeps where the job has none yet (a job given an instance type keeps it):

    {"id": "2xh100-80gb-hbm3.32cpu.256gib", "name": "2x NVIDIA H100 80GB HBM3, 32 CPUs, 256 GiB",
     "memory_limit_mib": 262144, "millicpu_limit": 32000, "gpu_count": 2,
     "gpu_type": "NVIDIA H100 80GB HBM3", "gpu_memory_limit_mib": 81559}

the fields that Baseten's ``instance_type`` has, and that the job page shows.
"""

from __future__ import annotations

import logging
import re
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

from jobpulse.agent.base import Collector, Sample

log = logging.getLogger("jobpulse.agent")

MIB = 1 << 20
GIB = 1 << 30
ACCELERATOR_MEMORY = ("gpu_mem_total_bytes", "npu_mem_total_bytes")
TRIES = 3  # ticks to wait for the limits before reporting nothing

Emit = Callable[[int, list[Sample]], None]


def accelerator_names(collectors: Sequence[Collector]) -> list[str]:
    """The model of each of the job's accelerators, from the collectors that sample them."""
    names: list[str] = []
    for collector in collectors:
        describe = getattr(collector, "device_names", None)
        if callable(describe):
            names.extend(describe())
    return names


def _number(value: float) -> str:
    return f"{value:g}" if value != int(value) else str(int(value))


def instance_type(samples: Sequence[Sample], accelerators: Sequence[str]) -> dict[str, Any] | None:
    """The instance type that one tick of samples and the accelerators' names describe; None when the tick
    carries neither a CPU nor a memory limit."""
    host = {s.metric: s.value for s in samples if s.device == ""}
    cpus, memory = host.get("cpu_limit_cores"), host.get("mem_limit_bytes")
    if cpus is None and memory is None:
        return None
    totals = {s.device: s.value for s in samples if s.metric in ACCELERATOR_MEMORY}
    count = len(accelerators) or len(totals)
    model = Counter(accelerators).most_common(1)[0][0] if accelerators else ("accelerator" if count else None)
    parts, ids = [], []
    if count:
        parts.append(f"{count}x {model}")
        ids.append(f"{count}x" + re.sub(r"[^a-z0-9.]+", "-", str(model).lower().removeprefix("nvidia ")))
    if cpus:
        parts.append(f"{_number(round(cpus, 2))} CPU{'s' if cpus != 1 else ''}")
        ids.append(f"{_number(round(cpus, 2))}cpu")
    if memory:
        parts.append(f"{_number(round(memory / GIB, 1))} GiB")
        ids.append(f"{_number(round(memory / GIB, 1))}gib")
    return {
        "id": ".".join(ids),
        "name": ", ".join(parts),
        "memory_limit_mib": round(memory / MIB) if memory else 0,
        "millicpu_limit": round(cpus * 1000) if cpus else 0,
        "gpu_count": count,
        "gpu_type": model if count else None,
        "gpu_memory_limit_mib": round(max(totals.values()) / MIB) if totals else None,
    }


def reporting_hardware(emit: Emit, report: Callable[[dict[str, Any]], None], collectors: Sequence[Collector]) -> Emit:
    """``emit``, which also hands the worker's instance type to ``report`` after the first tick that shows its
    limits (of the first ``TRIES`` ticks). Samples are emitted first: a failed report never costs a tick."""
    ticks = 0

    def emit_and_report(ts_ms: int, samples: list[Sample]) -> None:
        nonlocal ticks
        emit(ts_ms, samples)
        if ticks >= TRIES:
            return
        ticks += 1
        try:
            found = instance_type(samples, accelerator_names(collectors))
            if found is not None:
                ticks = TRIES
                report(found)
        except Exception as exc:  # the hardware summary is a bonus; sampling goes on without it
            ticks = TRIES
            log.warning("could not report the worker's hardware: %r", exc)

    return emit_and_report
