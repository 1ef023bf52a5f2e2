"""The agent's own cost: ``agent_cpu_seconds`` (CPU time used so far, including the commands it
ran such as ``npu-smi``), ``agent_cpu_util`` (% of one core since the previous sample) and
``agent_rss_bytes`` (resident memory), from ``/proc/<pid>/stat``."""

from __future__ import annotations

import os
from pathlib import Path

from jobpulse.agent.base import CounterRates, Sample, read_text
from jobpulse.agent.procs import CLOCK_TICKS, PAGE_SIZE, parse_stat


class SelfCollector:
    def __init__(self, proc_root: str | os.PathLike[str] = "/proc", pid: int | str = "self") -> None:
        self.path = Path(proc_root) / str(pid) / "stat"
        self._rates = CounterRates()

    def collect(self, now: float) -> list[Sample]:
        text = read_text(self.path)
        st = parse_stat(text) if text else None
        if st is None:
            return []
        cpu = st.cpu_ticks / CLOCK_TICKS
        out = [
            Sample("agent_cpu_seconds", "", cpu),
            Sample("agent_rss_bytes", "", float(st.rss_pages * PAGE_SIZE)),
        ]
        rate = self._rates.update(now, {"": cpu})
        if rate is not None:
            out.append(Sample("agent_cpu_util", "", 100.0 * rate))
        return out
