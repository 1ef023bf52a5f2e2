import pytest
from agent_fakes import Recorded

from jobpulse.agent.cgroup import find_cgroup
from jobpulse.agent.disk import (
    CgroupDisk,
    HostDisk,
    ProcessTreeDisk,
    is_whole_disk,
    parse_blkio,
    parse_io_stat,
)
from jobpulse.agent.procs import ProcessTree

MIB = 1 << 20


def _values(samples):
    return {s.metric: s.value for s in samples}


def _two(rec, make):
    rec.load("t0")
    collector = make()
    first = collector.collect(0.0)
    rec.load("t1")
    return first, _values(collector.collect(rec.interval))


def test_v2_io_stat_rates_sum_devices(tmp_path):
    # 259:0 reads 100 MiB and writes 50 MiB more in 1 s; 8:0 is idle.
    rec = Recorded("cgroup_v2", tmp_path)
    first, values = _two(rec, lambda: CgroupDisk(find_cgroup(rec.proc, rec.cgroup)))
    assert first == []
    assert values == {"disk_read_Bps": 100 * MIB, "disk_write_Bps": 50 * MIB}


def test_v1_blkio_read_and_write_lines(tmp_path):
    rec = Recorded("cgroup_v1_docker", tmp_path)
    _, values = _two(rec, lambda: CgroupDisk(find_cgroup(rec.proc, rec.cgroup)))
    assert values == {"disk_read_Bps": 10 * MIB, "disk_write_Bps": 20 * MIB}


def test_v1_blkio_without_any_io_yet_reports_zero(tmp_path):
    # Recorded on a v1 host whose blkio files hold only "Total 0".
    rec = Recorded("host_v1", tmp_path)
    _, values = _two(rec, lambda: CgroupDisk(find_cgroup(rec.proc, rec.cgroup)))
    assert values == {"disk_read_Bps": 0.0, "disk_write_Bps": 0.0}


def test_host_diskstats_counts_whole_disks_only(tmp_path):
    rec = Recorded("host_v1", tmp_path)
    for name in (rec.src / "sys_block.txt").read_text().split():
        (rec.sys / "block" / name / "slaves").mkdir(parents=True, exist_ok=True)
    _, values = _two(rec, lambda: HostDisk(rec.proc, rec.sys))
    # vda only (loop and zram are left out); sectors of 512 bytes
    assert values["disk_read_Bps"] == pytest.approx((7478330 - 7478186) * 512 / rec.interval)
    assert values["disk_write_Bps"] == pytest.approx((7217608 - 7108664) * 512 / rec.interval)


def test_process_tree_io_sums_members(tmp_path):
    rec = Recorded("proc_tree", tmp_path)
    root = int((rec.src / "root_pid.txt").read_text())
    _, values = _two(rec, lambda: ProcessTreeDisk(ProcessTree(root, rec.proc)))
    assert values == {"disk_read_Bps": 0.0, "disk_write_Bps": 0.0}


def test_whole_disk_names_without_sys(tmp_path):
    assert is_whole_disk("sda", tmp_path) and is_whole_disk("nvme0n1", tmp_path)
    assert not is_whole_disk("sda1", tmp_path) and not is_whole_disk("nvme0n1p2", tmp_path)
    assert not is_whole_disk("mmcblk0p1", tmp_path) and not is_whole_disk("dm-0", tmp_path)
    assert not is_whole_disk("loop3", tmp_path)


def test_stacked_devices_with_slaves_are_left_out(tmp_path):
    (tmp_path / "block/md0/slaves/sda").mkdir(parents=True)
    (tmp_path / "block/bcache0/slaves/sdb").mkdir(parents=True)
    (tmp_path / "block/sda/slaves").mkdir(parents=True)
    assert is_whole_disk("sda", tmp_path)
    assert not is_whole_disk("bcache0", tmp_path)
    assert not is_whole_disk("sda1", tmp_path)  # partitions are not in /sys/block


def test_parsers_take_the_kernel_formats():
    assert parse_io_stat("8:16 rbytes=1 wbytes=2 rios=3 wios=4 dbytes=0 dios=0\n") == {"8:16": (1, 2)}
    text = "8:0 Read 10\n8:0 Write 20\n8:0 Sync 30\n8:0 Async 0\n8:0 Total 30\nTotal 30\n"
    assert parse_blkio(text) == {"8:0": (10, 20)}


def test_process_io_from_recorded_self_io(tmp_path):
    # The recording process wrote an 8 MiB file (fsync'ed) between the two readings.
    src = Recorded("host_v1", tmp_path).src
    proc = tmp_path / "proc"
    pid = int((src / "t0/proc/self/stat").read_text().split()[0])
    disk = ProcessTreeDisk(ProcessTree(pid, proc))
    values = {}
    for t, snap in ((0.0, "t0"), (1.000496, "t1")):
        (proc / str(pid)).mkdir(parents=True, exist_ok=True)
        for name in ("stat", "io"):
            (proc / str(pid) / name).write_bytes((src / snap / "proc/self" / name).read_bytes())
        values = _values(disk.collect(t))
    assert values["disk_write_Bps"] == pytest.approx((8663040 - 36864) / 1.000496)
    assert values["disk_read_Bps"] == 0.0
