from pathlib import Path

from agent_fakes import DATA

from jobpulse.agent.cgroup import find_cgroup


def _roots(name: str, snap: str = "t0") -> tuple[Path, Path]:
    base = DATA / name / snap
    return base / "proc", base / "sys/fs/cgroup"


def test_v2_is_found_by_its_controllers_file():
    proc, cg = _roots("cgroup_v2")
    found = find_cgroup(proc, cg)
    assert found is not None and found.version == 2
    assert found.dir("cpu") == cg and found.dir("memory") == cg


def test_v1_path_under_the_mount_is_used_when_it_exists():
    # Recorded on a v1 host: the memory cgroup is /process_api/<id> under the memory mount.
    proc, cg = _roots("host_v1")
    found = find_cgroup(proc, cg)
    assert found is not None and found.version == 1
    memory = found.dir("memory")
    assert memory is not None and memory.parent.name == "process_api"
    assert found.dir("cpu") == cg / "cpu"
    assert found.dir("cpuacct") == cg / "cpuacct"


def test_v1_container_path_falls_back_to_the_mount_root():
    # Docker without a cgroup namespace: /proc/self/cgroup says /docker/<id>, the mount is that cgroup.
    proc, cg = _roots("cgroup_v1_docker")
    found = find_cgroup(proc, cg)
    assert found is not None
    assert found.dir("cpu") == cg / "cpu,cpuacct"
    assert found.dir("cpuacct") == cg / "cpu,cpuacct"
    assert found.dir("memory") == cg / "memory"
    assert found.dir("blkio") == cg / "blkio"


def test_limits_are_detected():
    assert find_cgroup(*_roots("cgroup_v2")).has_limits()
    assert find_cgroup(*_roots("cgroup_v1_docker")).has_limits()
    assert not find_cgroup(*_roots("host_v1")).has_limits()


def test_missing_proc_file_gives_none(tmp_path):
    assert find_cgroup(tmp_path / "proc", tmp_path / "cg") is None
