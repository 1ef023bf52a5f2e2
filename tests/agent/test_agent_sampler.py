import threading

from agent_fakes import Recorded, h100x8

from jobpulse.agent.base import Sample
from jobpulse.agent.cpu import CgroupCpu, HostCpu, ProcessTreeCpu
from jobpulse.agent.memory import CgroupMemory
from jobpulse.agent.nvidia import NvidiaCollector
from jobpulse.agent.sampler import Sampler, build_collectors
from jobpulse.agent.selfstats import SelfCollector


class Fixed:
    def __init__(self, *samples):
        self.samples = list(samples)

    def collect(self, now):
        return self.samples


class Broken:
    def collect(self, now):
        raise RuntimeError("boom")


def test_tick_stamps_all_samples_with_one_time():
    got = []
    sampler = Sampler(
        [Fixed(Sample("a", "", 1.0)), Fixed(Sample("b", "0", 2.0))],
        lambda ts, s: got.append((ts, s)),
        clock=lambda: 5.0,
        wall=lambda: 1_700_000_000.123,
    )
    sampler.tick()
    assert got == [(1_700_000_000_123, [Sample("a", "", 1.0), Sample("b", "0", 2.0)])]


def test_a_broken_collector_does_not_stop_the_others(caplog):
    got = []
    sampler = Sampler([Broken(), Fixed(Sample("a", "", 1.0))], lambda ts, s: got.extend(s))
    sampler.tick()
    sampler.tick()
    assert got == [Sample("a", "", 1.0)] * 2
    assert sum("boom" in r.getMessage() for r in caplog.records) == 1  # reported once


def test_non_finite_values_are_not_sent():
    got = []
    Sampler([Fixed(Sample("a", "", float("nan")), Sample("b", "", 2.0))], lambda ts, s: got.extend(s)).tick()
    assert got == [Sample("b", "", 2.0)]


def test_nothing_is_emitted_for_an_empty_tick():
    got = []
    Sampler([Fixed()], lambda ts, s: got.append(s)).tick()
    assert got == []


def test_run_stops_after_max_ticks():
    got = []
    sampler = Sampler([Fixed(Sample("a", "", 1.0))], lambda ts, s: got.append(ts), interval=0.01)
    sampler.run(threading.Event(), max_ticks=3)
    assert len(got) == 3 and got == sorted(got)


def test_stop_from_another_thread_ends_the_loop():
    sampler = Sampler([Fixed(Sample("a", "", 1.0))], lambda ts, s: None, interval=0.01)
    thread = sampler.start()
    sampler.stop(timeout=5)
    assert not thread.is_alive()


def test_cgroup_scope_in_a_recorded_v2_container(tmp_path):
    rec = Recorded("cgroup_v2", tmp_path)
    rec.load("t0")
    collectors = build_collectors(
        scope="auto", proc_root=str(rec.proc), cgroup_root=str(rec.cgroup), use_nvml=False, use_npu=False
    )
    kinds = [type(c) for c in collectors]
    assert CgroupCpu in kinds and CgroupMemory in kinds and SelfCollector in kinds  # auto: limits set


def test_host_scope_without_limits_outside_a_container(tmp_path, monkeypatch):
    monkeypatch.setattr("jobpulse.agent.sampler.in_container", lambda: False)
    rec = Recorded("host_v1", tmp_path)
    rec.load("t0")
    collectors = build_collectors(proc_root=str(rec.proc), cgroup_root=str(rec.cgroup), use_nvml=False, use_npu=False)
    assert HostCpu in [type(c) for c in collectors]


def test_process_scope_with_gpus_from_nvml(tmp_path):
    rec = Recorded("proc_tree", tmp_path)
    rec.load("t0")
    root = int((rec.src / "root_pid.txt").read_text())
    collectors = build_collectors(
        pid=root,
        proc_root=str(rec.proc),
        cgroup_root=str(tmp_path / "none"),
        nvml=h100x8(),
        env={"CUDA_VISIBLE_DEVICES": "0,1"},
        use_npu=False,
    )
    kinds = [type(c) for c in collectors]
    assert ProcessTreeCpu in kinds and NvidiaCollector in kinds
    gpu = next(c for c in collectors if isinstance(c, NvidiaCollector))
    assert [t.label for t in gpu.targets] == ["0", "1"]


def test_a_failing_sink_does_not_end_sampling():
    calls = []

    def sink(ts, samples):
        calls.append(ts)
        raise OSError("queue gone")

    sampler = Sampler([Fixed(Sample("a", "", 1.0))], sink, interval=0.01)
    sampler.run(threading.Event(), max_ticks=3)
    assert len(calls) == 3
