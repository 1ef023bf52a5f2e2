"""A process tree's CPU and I/O count each member once, also when its parent waits for it and the kernel adds the
child's counters to the parent's (seen on a real H100 run: 16 DataLoader workers reaped at once showed as 1,972
cores for one second)."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from jobpulse.agent.cpu import ProcessTreeCpu
from jobpulse.agent.disk import ProcessTreeDisk
from jobpulse.agent.procs import CLOCK_TICKS, ProcessTree, TreeGrowth


def _stat(pid: int, ppid: int, start: int, utime: int, cutime: int = 0) -> str:
    # fields 3.. of /proc/<pid>/stat: state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt
    # utime stime cutime cstime priority nice threads itreal starttime vsize rss
    return f"{pid} (py (x)) S {ppid} 1 1 0 -1 0 0 0 0 0 {utime} 0 {cutime} 0 20 0 1 0 {start} 1000 10\n"


def _write(proc: Path, members: dict[int, tuple[int, int, int, int, int]]) -> None:
    """members: pid -> (ppid, start, utime, cutime, write_bytes); the others are removed."""
    for old in proc.glob("[0-9]*"):
        if int(old.name) not in members:
            for f in sorted(old.rglob("*"), reverse=True):
                f.unlink() if f.is_file() else f.rmdir()
            old.rmdir()
    for pid, (ppid, start, utime, cutime, written) in members.items():
        d = proc / str(pid)
        (d / "task" / str(pid)).mkdir(parents=True, exist_ok=True)
        (d / "stat").write_text(_stat(pid, ppid, start, utime, cutime))
        (d / "io").write_text(f"rchar: 0\nwchar: 0\nread_bytes: 0\nwrite_bytes: {written}\n")
        kids = " ".join(str(p) for p, m in members.items() if m[0] == pid)
        (d / "task" / str(pid) / "children").write_text(kids + (" " if kids else ""))


def test_children_reaped_between_samples_are_not_counted_twice(tmp_path):
    proc = tmp_path / "proc"
    proc.mkdir()
    tree = ProcessTree(100, proc, rescan_every=1e9)
    cpu, disk = ProcessTreeCpu(tree, limit_cores=16.0), ProcessTreeDisk(tree)
    # t0: a root and two children that have each used 100 s of CPU and written 1 GB so far
    _write(
        proc,
        {100: (1, 5, 10, 0, 0), 101: (100, 7, 100 * CLOCK_TICKS, 0, 10**9), 102: (100, 8, 100 * CLOCK_TICKS, 0, 10**9)},
    )
    assert cpu.collect(0.0) == [] or all(s.metric != "cpu_cores" for s in cpu.collect(0.0))
    disk.collect(0.0)
    # t1, 1 s later: both children ran 1 s more each, wrote 1 MB more each, then were reaped; the kernel moved their
    # whole times into the root's cutime and their bytes into the root's io; the root itself ran 0.5 s
    tail, root_own = 1 * CLOCK_TICKS, CLOCK_TICKS // 2
    reaped = 2 * (100 * CLOCK_TICKS + tail)
    _write(proc, {100: (1, 5, 10 + root_own, reaped, 2 * (10**9 + 10**6))})
    values = {s.metric: s.value for s in cpu.collect(1.0)}
    assert values["cpu_cores"] == pytest.approx((2 * tail + root_own) / CLOCK_TICKS)
    written = {s.metric: s.value for s in disk.collect(1.0)}
    assert written["disk_write_Bps"] == pytest.approx(2 * 10**6)


def test_a_grandchild_reaped_with_its_parent_is_taken_off_the_nearest_ancestor_still_there():
    growth = TreeGrowth()
    growth.rates(0.0, {(1, 0): (0, (10.0,)), (2, 0): (1, (50.0,)), (3, 0): (2, (30.0,))})
    # 3 ran 2 more and was reaped by 2 (2's counter: own 50 + 32), then 2 ran 1 more and was reaped by 1
    rates = growth.rates(2.0, {(1, 0): (0, (10.0 + 83.0,))})
    assert rates == pytest.approx(((2.0 + 1.0) / 2.0,))


def test_a_pid_reused_by_a_new_process_counts_from_zero():
    growth = TreeGrowth()
    growth.rates(0.0, {(1, 0): (0, (5.0,)), (2, 10): (1, (40.0,))})
    # pid 2 ended, was reaped by 1 (which got its 40), and a new process got pid 2
    assert growth.rates(1.0, {(1, 0): (0, (45.0,)), (2, 99): (1, (0.25,))}) == pytest.approx((0.25,))


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs Linux /proc")
def test_a_real_tree_of_short_children_never_shows_more_cores_than_it_used():
    # One child at a time burns ~0.6 s of CPU and is reaped; sampled every 0.2 s, the tree never uses more than one
    # core (plus noise), while counting a child again when reaped would show ~3 cores.
    burn = "import time\nt=time.process_time()+0.6\nwhile time.process_time()<t: pass\n"
    script = f"import subprocess, sys\nfor _ in range(4): subprocess.run([sys.executable, '-c', {burn!r}])\n"
    parent = subprocess.Popen([sys.executable, "-c", script])
    cpu = ProcessTreeCpu(ProcessTree(parent.pid), limit_cores=64.0)
    seen, used = [], 0.0
    try:
        started = time.monotonic()
        while parent.poll() is None and time.monotonic() - started < 60:
            values = {s.metric: s.value for s in cpu.collect(time.monotonic())}
            if "cpu_cores" in values:
                seen.append(values["cpu_cores"])
            time.sleep(0.2)
    finally:
        parent.wait(timeout=60)
    assert len(seen) >= 5
    assert max(seen) < 1.6, seen
    used = sum(seen) * 0.2
    assert used > 0.5  # the children's CPU was counted (at least part of the 2.4 s they used)
