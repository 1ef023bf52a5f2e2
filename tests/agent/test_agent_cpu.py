import pytest
from agent_fakes import Recorded

from jobpulse.agent.base import Sample
from jobpulse.agent.cgroup import find_cgroup
from jobpulse.agent.cpu import CgroupCpu, HostCpu, ProcessTreeCpu
from jobpulse.agent.procs import CLOCK_TICKS, ProcessTree


def _values(samples: list[Sample]) -> dict[str, float]:
    return {s.metric: s.value for s in samples}


def _two_samples(rec: Recorded, make):
    rec.load("t0")
    collector = make()
    first = collector.collect(100.0)
    rec.load("t1")
    return first, collector.collect(100.0 + rec.interval)


def test_v2_usage_delta_against_cpu_max(tmp_path):
    # usage_usec grows by 1,500,000 in 1 s; cpu.max "200000 100000" is a 2-core quota.
    rec = Recorded("cgroup_v2", tmp_path)
    first, second = _two_samples(rec, lambda: CgroupCpu(find_cgroup(rec.proc, rec.cgroup)))
    assert _values(first) == {"cpu_limit_cores": 2.0}
    values = _values(second)
    assert values["cpu_cores"] == pytest.approx(1.5)
    assert values["cpu_util"] == pytest.approx(75.0)


def test_v1_cpuacct_delta_against_cfs_quota(tmp_path):
    # cpuacct.usage grows by 3e9 ns in 1 s; cfs quota 400000 / period 100000 is 4 cores.
    rec = Recorded("cgroup_v1_docker", tmp_path)
    _, second = _two_samples(rec, lambda: CgroupCpu(find_cgroup(rec.proc, rec.cgroup)))
    values = _values(second)
    assert values["cpu_cores"] == pytest.approx(3.0)
    assert values["cpu_util"] == pytest.approx(75.0)
    assert values["cpu_limit_cores"] == 4.0


def test_v1_without_quota_uses_the_cpuset_recorded(tmp_path):
    # Recorded on a 2-CPU v1 host, quota -1, cpuset 0-1, 1.000496 s apart.
    rec = Recorded("host_v1", tmp_path)
    _, second = _two_samples(rec, lambda: CgroupCpu(find_cgroup(rec.proc, rec.cgroup), host_cpus=64))
    cores = (300531694111 - 298530600262) / 1e9 / 1.000496
    values = _values(second)
    assert values["cpu_limit_cores"] == 2.0
    assert values["cpu_cores"] == pytest.approx(cores)
    assert values["cpu_util"] == pytest.approx(100 * cores / 2)


def test_host_cpu_from_recorded_proc_stat(tmp_path):
    rec = Recorded("host_v1", tmp_path)
    _, second = _two_samples(rec, lambda: HostCpu(rec.proc))
    # busy = user + nice + system + irq + softirq + steal, in clock ticks
    busy = (23171 + 6257 + 289 + 195) - (23005 + 6231 + 289 + 191)
    cores = busy / CLOCK_TICKS / 1.000496
    values = _values(second)
    assert values["cpu_cores"] == pytest.approx(cores)
    assert values["cpu_limit_cores"] == 2.0


def test_process_tree_sums_its_members_only(tmp_path):
    # sh -> (python3 busy loop, sleep); the recorder process, the tree root's parent, is left out.
    rec = Recorded("proc_tree", tmp_path)
    root = int((rec.src / "root_pid.txt").read_text())
    _, second = _two_samples(rec, lambda: ProcessTreeCpu(ProcessTree(root, rec.proc), limit_cores=2.0))
    ticks = (96 + 2 + 4 + 1) - (15 + 1 + 4 + 1)  # only the python3 child used CPU
    values = _values(second)
    assert values["cpu_cores"] == pytest.approx(ticks / CLOCK_TICKS / rec.interval)
    assert values["cpu_util"] == pytest.approx(100 * values["cpu_cores"] / 2.0)


def test_counter_reset_gives_no_rate_then_recovers(tmp_path):
    d = tmp_path / "cg"
    d.mkdir()
    (d / "cgroup.controllers").write_text("cpu memory\n")
    (d / "cpu.max").write_text("max 100000\n")
    cpu = CgroupCpu(find_cgroup(path="/", proc_root=tmp_path, cgroup_root=d), host_cpus=8)
    for t, usage in ((0.0, 5_000_000), (1.0, 1_000), (2.0, 2_001_000)):
        (d / "cpu.stat").write_text(f"usage_usec {usage}\nuser_usec 0\nsystem_usec 0\n")
        values = _values(cpu.collect(t))
    assert values["cpu_cores"] == pytest.approx(2.0)
    assert values["cpu_util"] == pytest.approx(25.0)


def test_unreadable_files_give_fewer_samples_not_an_error(tmp_path):
    rec = Recorded("cgroup_v2", tmp_path)
    rec.load("t0")
    cpu = CgroupCpu(find_cgroup(rec.proc, rec.cgroup))
    (rec.cgroup / "cpu.stat").unlink()
    (rec.cgroup / "cpu.max").write_text("garbage\n")
    assert cpu.collect(0.0) == [Sample("cpu_limit_cores", "", 64.0)]  # falls back to the cpuset
    assert HostCpu(tmp_path / "nowhere").collect(0.0) == []
