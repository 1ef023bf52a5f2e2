"""``cpu_iowait``: the machine's share of CPU time waiting on I/O, from two readings of ``/proc/stat``, sent by
each CPU source (host, cgroup, process tree) since the kernel counts it host-wide only."""

from pathlib import Path

import pytest
from agent_fakes import Recorded

from jobpulse.agent.base import Sample
from jobpulse.agent.cgroup import find_cgroup
from jobpulse.agent.cpu import CgroupCpu, HostCpu, HostIowait, ProcessTreeCpu
from jobpulse.agent.procs import ProcessTree

# user nice system idle iowait irq softirq steal guest guest_nice, then two CPUs
STAT = "cpu  {user} 0 {system} {idle} {iowait} 0 10 0 0 0\ncpu0 1 0 1 1 1 0 0 0 0 0\ncpu1 1 0 1 1 1 0 0 0 0 0\n"


def write_stat(proc: Path, *, user: int, system: int, idle: int, iowait: int) -> None:
    proc.mkdir(parents=True, exist_ok=True)
    (proc / "stat").write_text(STAT.format(user=user, system=system, idle=idle, iowait=iowait))


def iowait_of(samples: list[Sample]) -> list[float]:
    return [s.value for s in samples if s.metric == "cpu_iowait"]


def test_the_share_of_cpu_time_in_iowait_between_two_readings(tmp_path):
    proc = tmp_path / "proc"
    write_stat(proc, user=1000, system=500, idle=8000, iowait=490)
    iowait = HostIowait(proc)
    assert iowait.collect(0.0) == []  # a counter: the first reading gives none
    # 400 ticks in all went by (user 100, system 50, idle 50, iowait 200): half of them waiting on I/O
    write_stat(proc, user=1100, system=550, idle=8050, iowait=690)
    assert iowait.collect(1.0) == [Sample("cpu_iowait", "", 50.0)]


def test_an_iowait_counter_that_goes_backwards_gives_no_sample_then_recovers(tmp_path):
    proc = tmp_path / "proc"
    write_stat(proc, user=1000, system=500, idle=8000, iowait=500)
    iowait = HostIowait(proc)
    iowait.collect(0.0)
    write_stat(proc, user=1100, system=500, idle=8100, iowait=450)  # some kernels let iowait decrease
    assert iowait.collect(1.0) == []
    write_stat(proc, user=1200, system=500, idle=8150, iowait=500)  # 200 ticks, 50 of them iowait
    assert iowait.collect(2.0) == [Sample("cpu_iowait", "", 25.0)]


def test_no_proc_stat_gives_no_sample(tmp_path):
    iowait = HostIowait(tmp_path / "nowhere")
    assert iowait.collect(0.0) == [] and iowait.collect(1.0) == []


def test_the_host_source_sends_it_with_its_cpu_use(tmp_path):
    proc = tmp_path / "proc"
    write_stat(proc, user=1000, system=500, idle=8000, iowait=0)
    cpu = HostCpu(proc)
    cpu.collect(0.0)
    write_stat(proc, user=1100, system=500, idle=8080, iowait=20)
    samples = {s.metric: s.value for s in cpu.collect(1.0)}
    assert samples["cpu_iowait"] == pytest.approx(10.0)
    assert samples["cpu_limit_cores"] == 2.0 and samples["cpu_cores"] > 0


def test_the_recorded_host_waited_on_no_io(tmp_path):
    rec = Recorded("host_v1", tmp_path)
    rec.load("t0")
    cpu = HostCpu(rec.proc)
    cpu.collect(100.0)
    rec.load("t1")
    assert iowait_of(cpu.collect(100.0 + rec.interval)) == [0.0]  # iowait 1083 at both readings


def test_a_cgroup_source_sends_the_hosts_iowait(tmp_path):
    rec = Recorded("cgroup_v2", tmp_path)
    rec.load("t0")
    proc = tmp_path / "host-proc"
    write_stat(proc, user=1000, system=500, idle=8000, iowait=0)
    cpu = CgroupCpu(find_cgroup(rec.proc, rec.cgroup), proc_root=proc)
    assert iowait_of(cpu.collect(100.0)) == []
    rec.load("t1")
    write_stat(proc, user=1000, system=500, idle=8075, iowait=25)
    samples = cpu.collect(101.0)
    assert iowait_of(samples) == [25.0]
    assert {s.metric for s in samples} >= {"cpu_cores", "cpu_util", "cpu_limit_cores"}


def test_a_process_tree_source_sends_the_hosts_iowait_even_without_its_processes(tmp_path):
    proc = tmp_path / "proc"
    write_stat(proc, user=1000, system=500, idle=8000, iowait=0)
    cpu = ProcessTreeCpu(ProcessTree(4242, proc), limit_cores=2.0)  # no process 4242 in this /proc
    assert cpu.collect(0.0) == []
    write_stat(proc, user=1000, system=500, idle=8040, iowait=60)
    assert cpu.collect(1.0) == [Sample("cpu_iowait", "", 60.0)]
