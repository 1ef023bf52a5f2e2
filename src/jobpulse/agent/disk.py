"""Disk read/write rates: ``disk_read_Bps``, ``disk_write_Bps`` (bytes per second).

Sources:

- ``CgroupDisk``: the container's block I/O. v2 ``io.stat`` (``rbytes=``/``wbytes=`` per
  device); v1 ``blkio.throttle.io_service_bytes_recursive`` (or the non-recursive or BFQ/CFQ
  variants, whichever the kernel fills), lines ``MAJ:MIN Read N`` / ``MAJ:MIN Write N``.
- ``ProcessTreeDisk``: ``read_bytes``/``write_bytes`` of ``/proc/<pid>/io`` summed over a process
  tree (the bytes that reached or will reach the block layer, not page-cache hits); the kernel adds a reaped
  child's bytes to its parent's, counted once (``procs.TreeGrowth``).
- ``HostDisk``: ``/proc/diskstats`` sectors read/written (512 bytes each) over whole disks only:
  partitions, loop, RAM, zram, device-mapper and md devices are left out so that no byte is
  counted twice.
"""

from __future__ import annotations

import contextlib
import os
import re
from pathlib import Path

from jobpulse.agent.base import CounterRates, Sample, read_text
from jobpulse.agent.cgroup import Cgroup
from jobpulse.agent.procs import ProcessTree, TreeGrowth

V1_FILES = (
    "blkio.throttle.io_service_bytes_recursive",
    "blkio.throttle.io_service_bytes",
    "blkio.io_service_bytes_recursive",
    "blkio.bfq.io_service_bytes_recursive",
    "blkio.io_service_bytes",
    "blkio.bfq.io_service_bytes",
)
VIRTUAL_PREFIXES = ("loop", "ram", "zram", "dm-", "md", "sr", "fd", "nbd")
PARTITION = re.compile(r"^(?:nvme\d+n\d+p\d+|mmcblk\d+p\d+|(?:[hsv]|xv)d[a-z]+\d+)$")


def parse_io_stat(text: str) -> dict[str, tuple[int, int]]:
    """``{"MAJ:MIN": (read_bytes, write_bytes)}`` from cgroup v2 ``io.stat``."""
    out: dict[str, tuple[int, int]] = {}
    for line in text.splitlines():
        parts = line.split()
        if not parts:
            continue
        kv = dict(p.split("=", 1) for p in parts[1:] if "=" in p)
        try:
            out[parts[0]] = (int(kv.get("rbytes", 0)), int(kv.get("wbytes", 0)))
        except ValueError:
            continue
    return out


def parse_blkio(text: str) -> dict[str, tuple[int, int]]:
    """``{"MAJ:MIN": (read_bytes, write_bytes)}`` from a cgroup v1 ``blkio.*io_service_bytes*`` file."""
    out: dict[str, list[int]] = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) != 3 or parts[1] not in ("Read", "Write"):
            continue
        try:
            value = int(parts[2])
        except ValueError:
            continue
        entry = out.setdefault(parts[0], [0, 0])
        entry[0 if parts[1] == "Read" else 1] += value
    return {k: (v[0], v[1]) for k, v in out.items()}


def _rates(read: CounterRates, write: CounterRates, now: float, counters: dict) -> list[Sample]:
    r = read.update(now, {k: v[0] for k, v in counters.items()})
    w = write.update(now, {k: v[1] for k, v in counters.items()})
    out: list[Sample] = []
    if r is not None:
        out.append(Sample("disk_read_Bps", "", r))
    if w is not None:
        out.append(Sample("disk_write_Bps", "", w))
    return out


class CgroupDisk:
    def __init__(self, cgroup: Cgroup) -> None:
        self.cgroup = cgroup
        self._read = CounterRates()
        self._write = CounterRates()
        self._v1_file: str | None = None

    def _counters(self) -> dict[str, tuple[int, int]] | None:
        if self.cgroup.version == 2:
            d = self.cgroup.dir("io")
            text = read_text(d / "io.stat") if d else None
            return parse_io_stat(text) if text is not None else None
        d = self.cgroup.dir("blkio")
        if d is None:
            return None
        if self._v1_file is not None:
            text = read_text(d / self._v1_file)
            return parse_blkio(text) if text is not None else None
        # Pick the first file the kernel actually fills; until one has data, report zeros.
        seen = False
        for name in V1_FILES:
            text = read_text(d / name)
            if text is None:
                continue
            seen = True
            counters = parse_blkio(text)
            if counters:
                self._v1_file = name
                return counters
        return {} if seen else None

    def collect(self, now: float) -> list[Sample]:
        counters = self._counters()
        if counters is None:
            return []
        if not counters:
            # Accounting exists but no I/O happened yet: a zero rate, after the first sample.
            counters = {"": (0, 0)}
        return _rates(self._read, self._write, now, counters)


class ProcessTreeDisk:
    def __init__(self, tree: ProcessTree) -> None:
        self.tree = tree
        self._growth = TreeGrowth()

    def collect(self, now: float) -> list[Sample]:
        members = self.tree.snapshot(now)
        readings: dict[tuple[int, int], tuple[int, tuple[float, float]]] = {}
        for st in members.values():
            text = read_text(self.tree.proc / str(st.pid) / "io")
            if text is None:
                continue
            values: dict[str, int] = {}
            for line in text.splitlines():
                key, _, val = line.partition(":")
                if key in ("read_bytes", "write_bytes"):
                    with contextlib.suppress(ValueError):
                        values[key] = int(val)
            if len(values) == 2:
                readings[(st.pid, st.starttime)] = (st.ppid, (values["read_bytes"], values["write_bytes"]))
        rates = self._growth.rates(now, readings)
        if not rates:
            return []
        return [Sample("disk_read_Bps", "", rates[0]), Sample("disk_write_Bps", "", rates[1])]


def is_whole_disk(name: str, sys_root: Path) -> bool:
    """Whether ``name`` in ``/proc/diskstats`` is a physical whole disk (not a partition or a stack)."""
    if name.startswith(VIRTUAL_PREFIXES):
        return False
    block = sys_root / "block"
    if block.is_dir():
        dev = block / name
        if not dev.exists():
            return False  # partitions live under their disk, not in /sys/block
        try:
            return not any((dev / "slaves").iterdir())
        except OSError:
            return True
    # No /sys to ask: recognize partition names by their shape.
    return not PARTITION.match(name)


class HostDisk:
    def __init__(self, proc_root: str | os.PathLike[str] = "/proc", sys_root: str | os.PathLike[str] = "/sys"):
        self.path = Path(proc_root) / "diskstats"
        self.sys_root = Path(sys_root)
        self._read = CounterRates()
        self._write = CounterRates()
        self._disks: dict[str, bool] = {}

    def collect(self, now: float) -> list[Sample]:
        text = read_text(self.path)
        if text is None:
            return []
        counters: dict[str, tuple[int, int]] = {}
        for line in text.splitlines():
            parts = line.split()
            if len(parts) < 10:
                continue
            name = parts[2]
            whole = self._disks.get(name)
            if whole is None:
                whole = self._disks[name] = is_whole_disk(name, self.sys_root)
            if not whole:
                continue
            try:
                counters[name] = (int(parts[5]) * 512, int(parts[9]) * 512)
            except ValueError:
                continue
        return _rates(self._read, self._write, now, counters)
