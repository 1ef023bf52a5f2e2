import pytest
from agent_fakes import Recorded

from jobpulse.agent.cgroup import find_cgroup
from jobpulse.agent.memory import CgroupMemory, HostMemory, ProcessTreeMemory
from jobpulse.agent.procs import PAGE_SIZE, ProcessTree

GIB = 1 << 30
MIB = 1 << 20


def _values(samples):
    return {s.metric: s.value for s in samples}


def test_v2_separates_page_cache_and_keeps_shmem(tmp_path):
    # memory.current 6 GiB, memory.max 16 GiB, file 2 GiB of which shmem 512 MiB.
    rec = Recorded("cgroup_v2", tmp_path)
    rec.load("t0")
    values = _values(CgroupMemory(find_cgroup(rec.proc, rec.cgroup), host_total=1).collect(0.0))
    assert values["mem_page_cache_bytes"] == 2 * GIB - 512 * MIB
    assert values["mem_bytes"] == 6 * GIB - (2 * GIB - 512 * MIB)
    assert values["mem_util"] == pytest.approx(100 * 4.5 / 16)
    assert values["mem_limit_bytes"] == 16 * GIB


def test_v1_uses_total_cache_and_limit(tmp_path):
    # usage 5 GiB, limit 8 GiB, total_cache 1 GiB of which total_shmem 256 MiB.
    rec = Recorded("cgroup_v1_docker", tmp_path)
    rec.load("t0")
    values = _values(CgroupMemory(find_cgroup(rec.proc, rec.cgroup), host_total=1).collect(0.0))
    assert values["mem_page_cache_bytes"] == 768 * MIB
    assert values["mem_bytes"] == 5 * GIB - 768 * MIB
    assert values["mem_util"] == pytest.approx(100 * (4.25 / 8))
    assert values["mem_limit_bytes"] == 8 * GIB


def test_v1_unlimited_falls_back_to_host_memory_recorded(tmp_path):
    rec = Recorded("host_v1", tmp_path)
    rec.load("t0")
    cg = find_cgroup(rec.proc, rec.cgroup)
    values = _values(CgroupMemory(cg, proc_root=str(rec.proc)).collect(0.0))
    assert values["mem_bytes"] == 33427456 - 24154112
    assert values["mem_page_cache_bytes"] == 24154112
    assert values["mem_limit_bytes"] == 24683656 * 1024
    assert values["mem_util"] == pytest.approx(100 * (33427456 - 24154112) / (24683656 * 1024))


def test_v2_memory_max_unlimited_uses_the_host_total(tmp_path):
    rec = Recorded("cgroup_v2", tmp_path)
    rec.load("t0")
    (rec.cgroup / "memory.max").write_text("max\n")
    values = _values(CgroupMemory(find_cgroup(rec.proc, rec.cgroup), host_total=64 * GIB).collect(0.0))
    assert values["mem_limit_bytes"] == 64 * GIB


def test_host_memory_from_recorded_meminfo(tmp_path):
    rec = Recorded("host_v1", tmp_path)
    rec.load("t0")
    values = _values(HostMemory(rec.proc).collect(0.0))
    kib = 1024
    cache = (45520 + 2832172 - 9224) * kib
    assert values["mem_page_cache_bytes"] == cache
    assert values["mem_bytes"] == (24683656 - 20968232) * kib - cache
    assert values["mem_limit_bytes"] == 24683656 * kib


def test_process_tree_sums_resident_pages(tmp_path):
    rec = Recorded("proc_tree", tmp_path)
    rec.load("t0")
    root = int((rec.src / "root_pid.txt").read_text())
    values = _values(ProcessTreeMemory(ProcessTree(root, rec.proc), limit_bytes=GIB).collect(0.0))
    assert values["mem_bytes"] == (361 + 3366 + 412) * PAGE_SIZE
    assert "mem_page_cache_bytes" not in values


def test_missing_usage_file_gives_nothing(tmp_path):
    rec = Recorded("cgroup_v2", tmp_path)
    rec.load("t0")
    cg = find_cgroup(rec.proc, rec.cgroup)
    (rec.cgroup / "memory.current").unlink()
    assert CgroupMemory(cg, host_total=1).collect(0.0) == []
