"""A process and its descendants, read straight from ``/proc`` (or a recorded copy of it).

Discovery is cheap on purpose: every sample follows ``/proc/<pid>/task/<pid>/children`` from the
root down (one small read per member), and a full scan of ``/proc`` runs only every
``rescan_every`` seconds, to find children started by threads other than a process's main
thread (or when the kernel has no ``children`` file).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import NamedTuple

from jobpulse.agent.base import read_text

CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
PAGE_SIZE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


class ProcStat(NamedTuple):
    """The fields of ``/proc/<pid>/stat`` the collectors use."""

    pid: int
    ppid: int
    starttime: int  # clock ticks after boot; with pid, identifies a process across pid reuse
    cpu_ticks: int  # utime + stime + cutime + cstime (children that were waited for)
    rss_pages: int


def parse_stat(text: str) -> ProcStat | None:
    """Parse one ``/proc/<pid>/stat`` line; the command name may hold spaces and parentheses."""
    try:
        close = text.rindex(")")
        pid = int(text[: text.index(" ")])
        rest = text[close + 2 :].split()
        # rest[0] is field 3 (state): field n is rest[n - 3].
        return ProcStat(
            pid=pid,
            ppid=int(rest[1]),
            starttime=int(rest[19]),
            cpu_ticks=int(rest[11]) + int(rest[12]) + int(rest[13]) + int(rest[14]),
            rss_pages=int(rest[21]),
        )
    except (ValueError, IndexError):
        return None


class ProcessTree:
    """The live members of the tree rooted at ``root_pid``, as ``{pid: ProcStat}``."""

    def __init__(self, root_pid: int, proc_root: str | os.PathLike[str] = "/proc", *, rescan_every: float = 10.0):
        self.root_pid = root_pid
        self.proc = Path(proc_root)
        self.rescan_every = rescan_every
        self._cache_t: float | None = None
        self._cache: dict[int, ProcStat] = {}
        self._last_scan: float | None = None
        self._extra: set[int] = set()  # members found only by the last full scan

    def _stat(self, pid: int) -> ProcStat | None:
        text = read_text(self.proc / str(pid) / "stat")
        return parse_stat(text) if text else None

    def _children(self, pid: int) -> list[int] | None:
        text = read_text(self.proc / str(pid) / "task" / str(pid) / "children")
        if text is None:
            return None
        return [int(p) for p in text.split() if p.isdigit()]

    def _full_scan(self) -> dict[int, ProcStat]:
        by_parent: dict[int, list[ProcStat]] = {}
        stats: dict[int, ProcStat] = {}
        try:
            names = os.listdir(self.proc)
        except OSError:
            return {}
        for name in names:
            if not name.isdigit():
                continue
            st = self._stat(int(name))
            if st is not None:
                stats[st.pid] = st
                by_parent.setdefault(st.ppid, []).append(st)
        root = stats.get(self.root_pid)
        if root is None:
            return {}
        members = {root.pid: root}
        frontier = [root.pid]
        while frontier:
            pid = frontier.pop()
            for child in by_parent.get(pid, ()):
                if child.pid not in members:
                    members[child.pid] = child
                    frontier.append(child.pid)
        return members

    def snapshot(self, now: float) -> dict[int, ProcStat]:
        """Members and their stat at time ``now``; repeated calls with the same ``now`` share one read."""
        if self._cache_t == now:
            return self._cache
        members: dict[int, ProcStat] = {}
        need_scan = self._last_scan is None or now - self._last_scan >= self.rescan_every
        if not need_scan:
            frontier = [self.root_pid, *self._extra]
            while frontier:
                pid = frontier.pop()
                if pid in members:
                    continue
                st = self._stat(pid)
                if st is None or (pid != self.root_pid and pid in self._extra and st.ppid == 1):
                    continue
                members[pid] = st
                children = self._children(pid)
                if children is None:
                    need_scan = True
                    break
                frontier.extend(children)
        if need_scan:
            members = self._full_scan()
            self._last_scan = now
            walked: set[int] = set()
            frontier = [self.root_pid]
            while frontier:
                pid = frontier.pop()
                if pid in walked or pid not in members:
                    continue
                walked.add(pid)
                frontier.extend(self._children(pid) or ())
            self._extra = set(members) - walked
        self._cache_t = now
        self._cache = members
        return members

    def alive(self) -> bool:
        return (self.proc / str(self.root_pid)).exists()


Member = tuple[int, int]  # (pid, starttime): a process, across pid reuse


class TreeGrowth:
    """How much per-process cumulative counters grew over a process tree between two readings.

    The kernel adds a reaped child's counters to its parent's: CPU times to ``cutime``/``cstime`` in
    ``/proc/<pid>/stat``, I/O to ``/proc/<pid>/io``. Summing the members' deltas would count a child twice, once
    while it ran and once more, all at once, when its parent waits for it (16 DataLoader workers that ran two
    minutes would add 30 minutes of CPU to the one second they were reaped in). So the last reading of a member
    that is gone is taken off the growth of its nearest ancestor still in the tree: what is left of that growth is
    the ancestor's own, the child's since its last reading, and that of children too short-lived to be seen.
    A member first seen after the first reading counts from zero (it started since).

    ``rates(now, readings)`` takes ``{member: (ppid, values)}`` (values: a tuple of counters) read at ``now`` (s)
    and returns each counter's summed growth per second since the previous call, or None the first time.
    """

    def __init__(self) -> None:
        self._prev: dict[Member, tuple[int, tuple[float, ...]]] = {}
        self._prev_t: float | None = None

    def reset(self) -> None:
        self._prev, self._prev_t = {}, None

    def rates(self, now: float, readings: Mapping[Member, tuple[int, tuple[float, ...]]]) -> tuple[float, ...] | None:
        prev, prev_t = self._prev, self._prev_t
        self._prev, self._prev_t = dict(readings), now
        if prev_t is None or now <= prev_t or not readings:
            return None
        grown = self._growth(prev, readings)
        return tuple(g / (now - prev_t) for g in grown)

    def _growth(
        self,
        prev: Mapping[Member, tuple[int, tuple[float, ...]]],
        readings: Mapping[Member, tuple[int, tuple[float, ...]]],
    ) -> list[float]:
        carried = self._carried(prev, readings)
        total: list[float] | None = None
        for member, (_, values) in readings.items():
            old = prev.get(member, (0, (0.0,) * len(values)))[1]
            less = carried.get(member, (0.0,) * len(values))
            grown = [max(0.0, v - o - c) if v >= o else 0.0 for v, o, c in zip(values, old, less, strict=True)]
            total = grown if total is None else [a + b for a, b in zip(total, grown, strict=True)]
        return total or []

    @staticmethod
    def _carried(
        prev: Mapping[Member, tuple[int, tuple[float, ...]]], now: Mapping[Member, tuple[int, tuple[float, ...]]]
    ) -> dict[Member, tuple[float, ...]]:
        """Per member still present: the summed last readings of the gone members it is the nearest ancestor of."""
        by_pid = {member[0]: member for member in prev}
        carried: dict[Member, tuple[float, ...]] = {}
        for member, (ppid, values) in prev.items():
            if member in now:
                continue
            seen = {member}
            parent = by_pid.get(ppid)
            while parent is not None and parent not in now and parent not in seen:
                seen.add(parent)
                parent = by_pid.get(prev[parent][0])
            if parent is not None and parent in now:
                before = carried.get(parent, (0.0,) * len(values))
                carried[parent] = tuple(a + b for a, b in zip(before, values, strict=True))
        return carried
