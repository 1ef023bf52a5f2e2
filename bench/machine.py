"""One line describing the machine a benchmark ran on: CPU, cores, memory, load, OS, Python, and the file system its
fresh data directories are made on (where ``TMPDIR`` points, else ``/tmp``)."""

from __future__ import annotations

import os
import platform
import tempfile
from pathlib import Path


def describe() -> str:
    cpu = platform.processor() or platform.machine() or "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    return (
        f"{cpu}, {os.cpu_count()} cores, {memory:.0f} GiB RAM, load average {load}; "
        f"{platform.system()} {platform.release()}; Python {platform.python_version()}; "
        f"data directories in {tempfile.gettempdir()}, {file_system(tempfile.gettempdir())}"
    )


def file_system(path: str) -> str:
    """The file system holding ``path``: its type and device, and for ext4 whether it keeps a journal (without
    one, every new file scans the inodes deleted in the last minutes: a part of the engine costs more)."""
    try:
        mounts = [line.split()[:3] for line in Path("/proc/mounts").read_text().splitlines()]
    except OSError:
        return "file system unknown"
    real = os.path.realpath(path)
    inside = [m for m in mounts if real == m[1] or real.startswith(m[1].rstrip("/") + "/")]
    if not inside:
        return "file system unknown"
    device, mount_point, kind = max(inside, key=lambda m: len(m[1]))
    if kind == "ext4":
        name = Path(device).name
        journal = Path("/proc/fs/jbd2").is_dir() and any(
            entry.name.startswith(f"{name}-") for entry in Path("/proc/fs/jbd2").iterdir()
        )
        kind = "ext4 with a journal" if journal else "ext4 without a journal"
    return f"{kind} ({device} at {mount_point})"
