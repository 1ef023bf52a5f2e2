"""CPU use of a worker: ``cpu_cores`` (cores in use), ``cpu_util`` (% of the CPU limit), ``cpu_limit_cores``.

Three sources, one class each:

- ``CgroupCpu``: the container's cgroup. v2 ``cpu.stat`` ``usage_usec`` and ``cpu.max``
  (``"200000 100000"`` is a 2-core quota, ``"max 100000"`` none); v1 ``cpuacct.usage``
  (nanoseconds) and ``cpu.cfs_quota_us`` / ``cpu.cfs_period_us`` (quota -1 is none). Without a
  quota the limit is the cgroup's cpuset size, else the CPUs this process may use.
- ``ProcessTreeCpu``: a process and its descendants (``jobpulse run``), summing utime, stime and
  the times of waited-for children from ``/proc/<pid>/stat`` over the tree.
- ``HostCpu``: the whole machine, from the ``cpu`` line of ``/proc/stat``.

Usage is a counter, so the first sample gives no ``cpu_cores``/``cpu_util``.
"""

from __future__ import annotations

import os
from pathlib import Path

from jobpulse.agent.base import (
    CounterRates,
    Sample,
    count_cpu_list,
    host_cpu_count,
    parse_keyed,
    read_int,
    read_text,
)
from jobpulse.agent.cgroup import Cgroup
from jobpulse.agent.procs import CLOCK_TICKS, ProcessTree


def _samples(cores: float | None, limit: float | None) -> list[Sample]:
    out: list[Sample] = []
    if limit is not None and limit > 0:
        out.append(Sample("cpu_limit_cores", "", limit))
    if cores is not None:
        out.append(Sample("cpu_cores", "", cores))
        if limit is not None and limit > 0:
            out.append(Sample("cpu_util", "", 100.0 * cores / limit))
    return out


class CgroupCpu:
    """CPU use and limit of a cgroup (v1 or v2)."""

    def __init__(self, cgroup: Cgroup, host_cpus: float | None = None, limit_every: float = 30.0) -> None:
        self.cgroup = cgroup
        self.host_cpus = host_cpus if host_cpus is not None else float(host_cpu_count())
        self.limit_every = limit_every  # limits rarely change: read them again this often
        self._rates = CounterRates()
        self._limit: tuple[float, float | None] | None = None

    def usage_seconds(self) -> float | None:
        """Cumulative CPU time of the cgroup in seconds."""
        if self.cgroup.version == 2:
            d = self.cgroup.dir("cpu")
            text = read_text(d / "cpu.stat") if d else None
            if text is None:
                return None
            usec = parse_keyed(text).get("usage_usec")
            return usec / 1e6 if usec is not None else None
        d = self.cgroup.dir("cpuacct")
        ns = read_int(d / "cpuacct.usage") if d else None
        return ns / 1e9 if ns is not None else None

    def limit_cores(self) -> float | None:
        """The CPU quota in cores, else the cpuset size, else the host's CPUs."""
        quota: float | None = None
        if self.cgroup.version == 2:
            d = self.cgroup.dir("cpu")
            text = read_text(d / "cpu.max") if d else None
            if text:
                parts = text.split()
                if len(parts) == 2 and parts[0] != "max":
                    try:
                        quota = int(parts[0]) / int(parts[1])
                    except (ValueError, ZeroDivisionError):
                        quota = None
            cpuset_dir, cpuset_file = d, "cpuset.cpus.effective"
        else:
            d = self.cgroup.dir("cpu")
            q = read_int(d / "cpu.cfs_quota_us") if d else None
            p = read_int(d / "cpu.cfs_period_us") if d else None
            if q is not None and p and q > 0:
                quota = q / p
            cpuset_dir, cpuset_file = self.cgroup.dir("cpuset"), "cpuset.cpus"
        if quota is not None:
            return quota
        if cpuset_dir is not None:
            text = read_text(cpuset_dir / cpuset_file)
            n = count_cpu_list(text) if text else None
            if n:
                return float(n)
        return self.host_cpus

    def collect(self, now: float) -> list[Sample]:
        used = self.usage_seconds()
        cores = self._rates.update(now, {"": used}) if used is not None else None
        if self._limit is None or not 0 <= now - self._limit[0] < self.limit_every:
            self._limit = (now, self.limit_cores())
        return _samples(cores, self._limit[1])


class ProcessTreeCpu:
    """CPU use of a process tree, against a given limit (the cgroup's or the host's CPUs)."""

    def __init__(self, tree: ProcessTree, limit_cores: float | None = None) -> None:
        self.tree = tree
        self.limit = limit_cores if limit_cores is not None else float(host_cpu_count())
        self._rates = CounterRates(new_from_zero=True)

    def collect(self, now: float) -> list[Sample]:
        members = self.tree.snapshot(now)
        if not members:
            self._rates.reset()
            return []
        counters = {(st.pid, st.starttime): st.cpu_ticks / CLOCK_TICKS for st in members.values()}
        return _samples(self._rates.update(now, counters), self.limit)


class HostCpu:
    """CPU use of the whole machine from ``/proc/stat``."""

    def __init__(self, proc_root: str | os.PathLike[str] = "/proc") -> None:
        self.path = Path(proc_root) / "stat"
        self._rates = CounterRates()

    def collect(self, now: float) -> list[Sample]:
        text = read_text(self.path)
        if text is None:
            return []
        busy: float | None = None
        ncpu = 0
        for line in text.splitlines():
            if line.startswith("cpu "):
                fields = [int(x) for x in line.split()[1:]]
                # user nice system idle iowait irq softirq steal [guest guest_nice]; guest is in user.
                fields += [0] * (8 - len(fields))
                busy = (sum(fields[:8]) - fields[3] - fields[4]) / CLOCK_TICKS
            elif line.startswith("cpu"):
                ncpu += 1
        if busy is None:
            return []
        return _samples(self._rates.update(now, {"": busy}), float(ncpu) if ncpu else None)
