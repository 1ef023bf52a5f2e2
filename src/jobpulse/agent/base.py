"""Shared pieces of the collectors: the sample type, counter-to-rate tracking and file helpers.

Every collector takes its data source as a constructor argument (a root directory standing in
for ``/proc`` or ``/sys/fs/cgroup``, an NVML-like object, a command runner) and offers
``collect(now) -> list[Sample]``, where ``now`` is a monotonic time in seconds. A collector never
raises because a file is missing or unreadable: it returns fewer samples instead.
"""

from __future__ import annotations

import math
import os
from collections.abc import Hashable, Iterable, Mapping
from pathlib import Path
from typing import NamedTuple, Protocol


class Sample(NamedTuple):
    """One reading: a DESIGN.md system metric name, the device index (``""`` for host level), the value."""

    metric: str
    device: str
    value: float


class Collector(Protocol):
    def collect(self, now: float) -> list[Sample]: ...


def read_text(path: str | os.PathLike[str]) -> str | None:
    """The whole file as text, or None when it cannot be read."""
    try:
        with open(path, encoding="ascii", errors="replace") as f:
            return f.read()
    except OSError:
        return None


def read_int(path: str | os.PathLike[str]) -> int | None:
    text = read_text(path)
    if text is None:
        return None
    try:
        return int(text.split()[0])
    except (ValueError, IndexError):
        return None


def parse_keyed(text: str) -> dict[str, int]:
    """Parse ``key value`` lines (cgroup ``memory.stat``, ``cpu.stat``) into a dict of integers."""
    out: dict[str, int] = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) >= 2:
            try:
                out[parts[0]] = int(parts[1])
            except ValueError:
                continue
    return out


def count_cpu_list(text: str) -> int | None:
    """Number of CPUs in a kernel CPU list such as ``0-3,8-11`` (cpuset.cpus)."""
    text = text.strip()
    if not text:
        return None
    n = 0
    for part in text.split(","):
        lo, sep, hi = part.partition("-")
        try:
            n += (int(hi) - int(lo) + 1) if sep else 1
        except ValueError:
            return None
    return n or None


def host_cpu_count() -> int:
    """CPUs this process may run on (its affinity), the fallback CPU limit."""
    try:
        return len(os.sched_getaffinity(0)) or (os.cpu_count() or 1)
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def host_mem_total(proc_root: str | os.PathLike[str] = "/proc") -> int | None:
    """MemTotal from ``/proc/meminfo`` in bytes, the fallback memory limit."""
    text = read_text(Path(proc_root) / "meminfo")
    if text is None:
        return None
    for line in text.splitlines():
        if line.startswith("MemTotal:"):
            try:
                return int(line.split()[1]) * 1024
            except (IndexError, ValueError):
                return None
    return None


class CounterRates:
    """Turns cumulative counters into per-second rates.

    ``update(now, counters)`` takes the current value of every counter (keyed by anything
    hashable: an interface, a device, a process) and returns the summed rate over the counters
    that have a usable previous reading, or None when there is none: the first call never yields
    a rate. A counter that went backwards (a reset: driver reload, interface re-created, pid
    reused) contributes nothing this time and restarts from its new value.

    With ``new_from_zero`` a counter first seen after the first call is taken to have started at
    zero since the previous reading; that is right for per-process counters (a new process's CPU
    time and I/O all happened since it was forked) and wrong for interfaces or disks.
    """

    def __init__(self, *, new_from_zero: bool = False) -> None:
        self._prev: dict[Hashable, float] = {}
        self._prev_t: float | None = None
        self._new_from_zero = new_from_zero

    def update(self, now: float, counters: Mapping[Hashable, float]) -> float | None:
        prev, prev_t = self._prev, self._prev_t
        self._prev = dict(counters)
        self._prev_t = now
        if prev_t is None:
            return None
        dt = now - prev_t
        if dt <= 0:
            return None
        total = 0.0
        usable = False
        for key, value in counters.items():
            old = prev.get(key)
            if old is None:
                if not self._new_from_zero:
                    continue
                old = 0.0
            delta = value - old
            if delta < 0:
                continue
            total += delta
            usable = True
        if not usable:
            return None
        return total / dt

    def reset(self) -> None:
        self._prev = {}
        self._prev_t = None


def finite(samples: Iterable[Sample]) -> list[Sample]:
    """Drop samples whose value is not a finite number."""
    return [s for s in samples if isinstance(s.value, int | float) and math.isfinite(s.value)]
