"""CPU use of a worker: ``cpu_cores`` (cores in use), ``cpu_util`` (% of the CPU limit), ``cpu_limit_cores``,
and ``cpu_iowait`` (% of the machine's CPU time idle waiting on I/O).

Three sources, one class each:

- ``CgroupCpu``: the container's cgroup. v2 ``cpu.stat`` ``usage_usec`` and ``cpu.max``
  (``"200000 100000"`` is a 2-core quota, ``"max 100000"`` none); v1 ``cpuacct.usage``
  (nanoseconds) and ``cpu.cfs_quota_us`` / ``cpu.cfs_period_us`` (quota -1 is none). Without a
  quota the limit is the cgroup's cpuset size, else the CPUs this process may use.
- ``ProcessTreeCpu``: a process and its descendants (``jobpulse run``), summing utime, stime and
  the times of waited-for children from ``/proc/<pid>/stat`` over the tree; a member's time is counted once,
  also when its parent waits for it (``procs.TreeGrowth``).
- ``HostCpu``: the whole machine, from the ``cpu`` line of ``/proc/stat``.

Usage is a counter, so the first sample gives no ``cpu_cores``/``cpu_util``.

``cpu_iowait`` is host-wide whatever the source: the kernel counts I/O wait per CPU, not per cgroup or process
(``HostIowait``: the ``iowait`` share of all CPU time, user to steal, between two readings of the ``cpu`` line of
``/proc/stat``, as ``top`` shows ``wa``). Each of the three sources sends it, so the underused detector can name
waiting on I/O as a cause; in a container it is the node's, shared by every job on it. A reading where the
counter went backwards (some kernels let iowait decrease) gives none.
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
from jobpulse.agent.procs import CLOCK_TICKS, ProcessTree, TreeGrowth


def _samples(cores: float | None, limit: float | None) -> list[Sample]:
    out: list[Sample] = []
    if limit is not None and limit > 0:
        out.append(Sample("cpu_limit_cores", "", limit))
    if cores is not None:
        out.append(Sample("cpu_cores", "", cores))
        if limit is not None and limit > 0:
            out.append(Sample("cpu_util", "", 100.0 * cores / limit))
    return out


def _cpu_ticks(text: str) -> list[int] | None:
    """The fields of the ``cpu`` line of ``/proc/stat``: user nice system idle iowait irq softirq steal."""
    for line in text.splitlines():
        if line.startswith("cpu "):
            fields = [int(x) for x in line.split()[1:9]]
            return fields + [0] * (8 - len(fields))
    return None


class HostIowait:
    """``cpu_iowait``: the machine's share of CPU time waiting on I/O (%) since the previous reading."""

    def __init__(self, proc_root: str | os.PathLike[str] = "/proc") -> None:
        self.path = Path(proc_root) / "stat"
        self._prev: tuple[int, int] | None = None

    def update(self, ticks: list[int] | None) -> list[Sample]:
        """The sample of the ``cpu`` line's fields ``ticks`` (none the first time, or when they are unknown)."""
        if ticks is None:
            self._prev = None
            return []
        prev, self._prev = self._prev, (ticks[4], sum(ticks))
        if prev is None:
            return []
        waited, total = self._prev[0] - prev[0], self._prev[1] - prev[1]
        if waited < 0 or total <= 0:
            return []
        return [Sample("cpu_iowait", "", 100.0 * waited / total)]

    def collect(self, now: float) -> list[Sample]:
        text = read_text(self.path)
        return self.update(_cpu_ticks(text) if text is not None else None)


class CgroupCpu:
    """CPU use and limit of a cgroup (v1 or v2), and the host's ``cpu_iowait`` (from ``proc_root``)."""

    def __init__(
        self,
        cgroup: Cgroup,
        host_cpus: float | None = None,
        limit_every: float = 30.0,
        proc_root: str | os.PathLike[str] = "/proc",
    ) -> None:
        self.cgroup = cgroup
        self.iowait = HostIowait(proc_root)
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
        return _samples(cores, self._limit[1]) + self.iowait.collect(now)


class ProcessTreeCpu:
    """CPU use of a process tree, against a given limit (the cgroup's or the host's CPUs), and the host's
    ``cpu_iowait`` (from the tree's ``/proc``)."""

    def __init__(self, tree: ProcessTree, limit_cores: float | None = None) -> None:
        self.tree = tree
        self.iowait = HostIowait(tree.proc)
        self.limit = limit_cores if limit_cores is not None else float(host_cpu_count())
        self._growth = TreeGrowth()

    def collect(self, now: float) -> list[Sample]:
        members = self.tree.snapshot(now)
        iowait = self.iowait.collect(now)
        if not members:
            self._growth.reset()
            return iowait
        readings = {(st.pid, st.starttime): (st.ppid, (st.cpu_ticks / CLOCK_TICKS,)) for st in members.values()}
        cores = self._growth.rates(now, readings)
        return _samples(cores[0] if cores else None, self.limit) + iowait


class HostCpu:
    """CPU use of the whole machine from ``/proc/stat``, and its ``cpu_iowait``."""

    def __init__(self, proc_root: str | os.PathLike[str] = "/proc") -> None:
        self.path = Path(proc_root) / "stat"
        self._rates = CounterRates()
        self.iowait = HostIowait(proc_root)

    def collect(self, now: float) -> list[Sample]:
        text = read_text(self.path)
        if text is None:
            return self.iowait.update(None)
        # user nice system idle iowait irq softirq steal [guest guest_nice]; guest is in user.
        ticks = _cpu_ticks(text)
        ncpu = sum(1 for line in text.splitlines() if line.startswith("cpu") and not line.startswith("cpu "))
        if ticks is None:
            return self.iowait.update(None)
        busy = (sum(ticks) - ticks[3] - ticks[4]) / CLOCK_TICKS
        return _samples(self._rates.update(now, {"": busy}), float(ncpu) if ncpu else None) + self.iowait.update(ticks)
