"""Memory use of a worker.

Metrics (bytes unless noted):

- ``mem_bytes``: memory in use *without* the page cache, the part that counts toward an
  out-of-memory kill. Shared memory (tmpfs, ``/dev/shm`` used by data loaders) stays in it.
- ``mem_util``: ``mem_bytes`` as % of ``mem_limit_bytes``.
- ``mem_limit_bytes``: the cgroup memory limit, or the machine's total memory when unlimited.
- ``mem_page_cache_bytes``: file pages cached by the kernel for the worker, reclaimable on demand.
  (DESIGN's ``cache_bytes`` is something else: the bytes used on the configured cache *path*,
  see ``storage.py``.)

Sources: ``CgroupMemory`` (v2 ``memory.current``, ``memory.max``, ``memory.stat`` ``file`` and
``shmem``; v1 ``memory.usage_in_bytes``, ``memory.limit_in_bytes``, ``memory.stat``
``total_cache``, ``total_shmem`` and ``hierarchical_memory_limit``), ``ProcessTreeMemory``
(resident set sizes summed over a process tree; no page cache figure) and ``HostMemory``
(``/proc/meminfo``: used is MemTotal - MemFree, page cache is Buffers + Cached - Shmem).
"""

from __future__ import annotations

import os
from pathlib import Path

from jobpulse.agent.base import Sample, host_mem_total, parse_keyed, read_int, read_text
from jobpulse.agent.cgroup import V1_UNLIMITED, Cgroup
from jobpulse.agent.procs import PAGE_SIZE, ProcessTree


def _samples(used: float, limit: float | None, page_cache: float | None) -> list[Sample]:
    out = [Sample("mem_bytes", "", float(used))]
    if limit:
        out.append(Sample("mem_util", "", 100.0 * used / limit))
        out.append(Sample("mem_limit_bytes", "", float(limit)))
    if page_cache is not None:
        out.append(Sample("mem_page_cache_bytes", "", float(page_cache)))
    return out


class CgroupMemory:
    """Memory use, page cache and limit of a cgroup (v1 or v2)."""

    def __init__(self, cgroup: Cgroup, host_total: int | None = None, proc_root: str = "/proc") -> None:
        self.cgroup = cgroup
        self.host_total = host_total if host_total is not None else host_mem_total(proc_root)

    def collect(self, now: float) -> list[Sample]:
        d = self.cgroup.dir("memory")
        if d is None:
            return []
        stat_text = read_text(d / "memory.stat")
        stat = parse_keyed(stat_text) if stat_text else {}
        limit: int | None
        if self.cgroup.version == 2:
            usage = read_int(d / "memory.current")
            max_text = (read_text(d / "memory.max") or "max").strip()
            limit = int(max_text) if max_text.isdigit() else None
            file_pages, shmem = stat.get("file"), stat.get("shmem", 0)
        else:
            usage = read_int(d / "memory.usage_in_bytes")
            limit = read_int(d / "memory.limit_in_bytes")
            hier = stat.get("hierarchical_memory_limit")
            if hier is not None and (limit is None or hier < limit):
                limit = hier
            if limit is not None and limit >= V1_UNLIMITED:
                limit = None
            file_pages = stat.get("total_cache", stat.get("cache"))
            shmem = stat.get("total_shmem", stat.get("shmem", 0))
        if usage is None:
            return []
        page_cache = max(0, file_pages - shmem) if file_pages is not None else None
        used = max(0, usage - (page_cache or 0))
        return _samples(used, limit or self.host_total, page_cache)


class ProcessTreeMemory:
    """Resident memory summed over a process tree, against a limit (the cgroup's or the machine's)."""

    def __init__(self, tree: ProcessTree, limit_bytes: int | None = None, proc_root: str = "/proc") -> None:
        self.tree = tree
        self.limit = limit_bytes if limit_bytes is not None else host_mem_total(proc_root)

    def collect(self, now: float) -> list[Sample]:
        members = self.tree.snapshot(now)
        if not members:
            return []
        rss = sum(st.rss_pages for st in members.values()) * PAGE_SIZE
        return _samples(rss, self.limit, None)


class HostMemory:
    """Memory use of the whole machine from ``/proc/meminfo``."""

    def __init__(self, proc_root: str | os.PathLike[str] = "/proc") -> None:
        self.path = Path(proc_root) / "meminfo"

    def collect(self, now: float) -> list[Sample]:
        text = read_text(self.path)
        if text is None:
            return []
        info: dict[str, int] = {}
        for line in text.splitlines():
            key, _, rest = line.partition(":")
            parts = rest.split()
            if parts and parts[0].isdigit():
                info[key] = int(parts[0]) * 1024
        total, free = info.get("MemTotal"), info.get("MemFree")
        if total is None or free is None:
            return []
        page_cache = max(0, info.get("Buffers", 0) + info.get("Cached", 0) - info.get("Shmem", 0))
        used = max(0, total - free - page_cache)
        return _samples(used, total, page_cache)
