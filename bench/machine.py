"""One line describing the machine a benchmark ran on: CPU, cores, memory, load, OS and Python."""

from __future__ import annotations

import os
import platform
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
        f"{platform.system()} {platform.release()}; Python {platform.python_version()}"
    )
