"""The sampling loop, and the choice of collectors for a worker.

``Sampler.tick()`` asks every collector for its samples, stamps them with one wall-clock time
and hands them to ``emit``. A collector that raises is skipped for that tick (reported once), so
one broken source never stops the others. ``run()`` ticks on a fixed grid (``interval`` seconds
apart, skipping ticks it was too busy to make) until its stop event is set.
"""

from __future__ import annotations

import logging
import os
import shutil
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from jobpulse.agent.ascend import AscendCollector
from jobpulse.agent.base import Collector, Sample, finite, host_cpu_count, host_mem_total
from jobpulse.agent.cgroup import find_cgroup, in_container
from jobpulse.agent.cpu import CgroupCpu, HostCpu, ProcessTreeCpu
from jobpulse.agent.disk import CgroupDisk, HostDisk, ProcessTreeDisk
from jobpulse.agent.memory import CgroupMemory, HostMemory, ProcessTreeMemory
from jobpulse.agent.network import NetworkCollector
from jobpulse.agent.nvidia import NvidiaCollector
from jobpulse.agent.procs import ProcessTree
from jobpulse.agent.selfstats import SelfCollector
from jobpulse.agent.storage import PathSpec, StorageCollector

log = logging.getLogger("jobpulse.agent")

Emit = Callable[[int, list[Sample]], None]  # (ts in epoch ms, samples)


class Sampler:
    def __init__(
        self,
        collectors: Sequence[Collector],
        emit: Emit,
        interval: float = 10.0,
        *,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
    ) -> None:
        if interval <= 0:
            raise ValueError("interval must be positive")
        self.collectors = list(collectors)
        self.emit = emit
        self.interval = interval
        self.clock = clock
        self.wall = wall
        self.ticks = 0
        self._failed: set[int] = set()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def tick(self) -> list[Sample]:
        """One round over all collectors; the samples are emitted and returned."""
        now = self.clock()
        ts_ms = int(self.wall() * 1000)
        samples: list[Sample] = []
        for i, collector in enumerate(self.collectors):
            try:
                samples.extend(collector.collect(now))
            except Exception as exc:  # a collector bug must not stop sampling
                if i not in self._failed:
                    self._failed.add(i)
                    log.warning("collector %s failed: %r", type(collector).__name__, exc)
        samples = finite(samples)
        self.ticks += 1
        if samples:
            try:
                self.emit(ts_ms, samples)
            except Exception as exc:  # a sink problem must not end the sampling thread
                if -1 not in self._failed:
                    self._failed.add(-1)
                    log.warning("could not hand over samples: %r", exc)
        return samples

    def run(self, stop: threading.Event | None = None, max_ticks: int | None = None) -> None:
        """Tick every ``interval`` seconds until ``stop`` (or ``stop()``) is set or ``max_ticks`` are done."""
        stop = stop or self._stop
        start = self.clock()
        n = 0
        while not stop.is_set():
            self.tick()
            n += 1
            if max_ticks is not None and n >= max_ticks:
                break
            due = start + n * self.interval
            now = self.clock()
            if now > due:  # fell behind: skip the ticks that are already past
                n = int((now - start) / self.interval) + 1
                due = start + n * self.interval
            stop.wait(max(0.0, due - now))

    def start(self) -> threading.Thread:
        self._stop.clear()
        self._thread = threading.Thread(target=self.run, name="jobpulse-sampler", daemon=True)
        self._thread.start()
        return self._thread

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
        self.close()

    def close(self) -> None:
        for collector in self.collectors:
            close = getattr(collector, "close", None)
            if callable(close):
                try:
                    close()
                except Exception as exc:
                    log.debug("closing %s: %r", type(collector).__name__, exc)


def build_collectors(
    *,
    scope: str = "auto",
    pid: int | None = None,
    cgroup_path: str | None = None,
    paths: Sequence[PathSpec] = (),
    gpus: str | None = None,
    env: Mapping[str, str] | None = None,
    nvml: Any = None,
    use_nvml: bool = True,
    use_npu: bool | None = None,
    proc_root: str = "/proc",
    sys_root: str = "/sys",
    cgroup_root: str = "/sys/fs/cgroup",
) -> list[Collector]:
    """The collectors for one worker.

    ``scope`` says whose CPU, memory and disk I/O are measured: ``cgroup`` (the container of
    ``pid``, or of the agent itself), ``process`` (the process tree of ``pid``), ``host`` (the
    machine), or ``auto``: ``process`` when a pid is given, else ``cgroup`` inside a container
    or when the cgroup has limits, else ``host``.
    """
    env = os.environ if env is None else env
    cg = find_cgroup(proc_root, cgroup_root, pid if pid is not None else "self", path=cgroup_path)
    if scope == "auto":
        if pid is not None:
            scope = "process"
        elif cg is not None and (cgroup_path is not None or in_container() or cg.has_limits()):
            scope = "cgroup"
        else:
            scope = "host"
    collectors: list[Collector] = []
    if scope == "cgroup" and cg is not None:
        collectors += [CgroupCpu(cg, proc_root=proc_root), CgroupMemory(cg, proc_root=proc_root), CgroupDisk(cg)]
    elif scope == "process":
        if pid is None:
            raise ValueError("scope 'process' needs a pid")
        tree = ProcessTree(pid, proc_root)
        cpu_limit: float | None = None
        mem_limit: int | None = None
        if cg is not None and cg.has_limits():
            cpu_limit = CgroupCpu(cg).limit_cores()
            mem = CgroupMemory(cg, proc_root=proc_root).collect(0.0)
            mem_limit = next((int(s.value) for s in mem if s.metric == "mem_limit_bytes"), None)
        collectors += [
            ProcessTreeCpu(tree, cpu_limit or float(host_cpu_count())),
            ProcessTreeMemory(tree, mem_limit or host_mem_total(proc_root)),
            ProcessTreeDisk(tree),
        ]
    else:
        collectors += [HostCpu(proc_root), HostMemory(proc_root), HostDisk(proc_root, sys_root)]
    collectors.append(NetworkCollector(proc_root, pid if pid is not None else "self"))
    if paths:
        collectors.append(StorageCollector(list(paths)))
    if use_nvml:
        gpu = NvidiaCollector.create(nvml, env=env, gpus=gpus)
        if gpu is not None:
            collectors.append(gpu)
    if use_npu or (use_npu is None and shutil.which("npu-smi")):
        collectors.append(AscendCollector(env=env))
    collectors.append(SelfCollector(proc_root))
    return collectors
