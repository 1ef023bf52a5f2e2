"""The CPU a jobpulse server process used, by kind of thread (Linux: from ``/proc``; nothing elsewhere).

chdb names its threads: ``ThreadPool`` threads run the engine's statements, ``MergeMutate`` threads its background
merges of the parts that inserts make; the interpreter's threads keep the process's own name.
"""

from __future__ import annotations

import os
from collections import Counter

# chdb's thread names -> what they do for the server
THREAD_KINDS = {"python": "interpreter", "MergeMutate": "engine merges", "ThreadPool": "engine statements"}


def thread_cpu(pid: int) -> Counter:
    """CPU seconds each kind of thread of process ``pid`` has used so far (empty for pid 0, no process, or where /proc
    is not there)."""
    used: Counter = Counter()
    tasks = f"/proc/{pid}/task"
    if not pid or not os.path.isdir(tasks):
        return used
    tick = os.sysconf("SC_CLK_TCK")
    for tid in os.listdir(tasks):
        try:
            with open(f"{tasks}/{tid}/comm") as comm, open(f"{tasks}/{tid}/stat") as stat:
                name, fields = comm.read().strip(), stat.read().rsplit(")", 1)[1].split()
        except OSError:  # the thread ended meanwhile
            continue
        used[THREAD_KINDS.get(name.rstrip("0123456789"), "other")] += (int(fields[11]) + int(fields[12])) / tick
    return used


def shares(used: Counter, per: float, unit: str) -> str:
    """``used`` (CPU seconds by kind) divided by ``per``: the total, then each kind, in ``unit``."""
    kinds = [kind for kind in (*THREAD_KINDS.values(), "other") if kind in used]
    parts = ", ".join(f"{kind} {used[kind] / per:.2f}" for kind in kinds)
    return f"{sum(used.values()) / per:.2f} {unit} ({parts})"
