"""The worker's hardware summary: the job's instance type, from the agent's first samples and its devices."""

import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from agent_fakes import h100x8

from helpers import child_env
from jobpulse.agent.ascend import AscendCollector
from jobpulse.agent.base import Sample
from jobpulse.agent.hardware import accelerator_names, instance_type, reporting_hardware
from jobpulse.agent.nvidia import NvidiaCollector

DATA = Path(__file__).parent / "data"
GIB = 1 << 30
HOST = [Sample("cpu_limit_cores", "", 32.0), Sample("mem_limit_bytes", "", 256.0 * GIB), Sample("cpu_cores", "", 3.5)]


def test_two_of_eight_h100s_with_their_memory_cpus_and_memory():
    collector = NvidiaCollector(h100x8(), env={"CUDA_VISIBLE_DEVICES": "6,2"}, use_gpm=False, watch_xid=False)
    samples = HOST + collector.collect(0.0)
    found = instance_type(samples, accelerator_names([collector]))
    assert found == {
        "id": "2xh100-80gb-hbm3.32cpu.256gib",
        "name": "2x NVIDIA H100 80GB HBM3, 32 CPUs, 256 GiB",
        "memory_limit_mib": 256 * 1024,
        "millicpu_limit": 32_000,
        "gpu_count": 2,
        "gpu_type": "NVIDIA H100 80GB HBM3",
        "gpu_memory_limit_mib": 81_559,  # as NVML reports the board's memory
    }


def test_ascend_chips_are_the_accelerators_of_an_npu_worker():
    text = (DATA / "npu_smi_info_910b3x8.txt").read_text()
    calls = []
    collector = AscendCollector(lambda argv: calls.append(argv) or text, env={"ASCEND_RT_VISIBLE_DEVICES": "0-3"})
    samples = [Sample("cpu_limit_cores", "", 24.5), Sample("mem_limit_bytes", "", 192.0 * GIB)]
    found = instance_type(samples + collector.collect(0.0), accelerator_names([collector]))
    assert len(calls) == 1  # the names come from the sample's own npu-smi table
    assert (found["gpu_count"], found["gpu_type"], found["gpu_memory_limit_mib"]) == (4, "Ascend 910B3", 65_536)
    assert (found["name"], found["millicpu_limit"]) == ("4x Ascend 910B3, 24.5 CPUs, 192 GiB", 24_500)


def test_a_cpu_only_worker_has_no_accelerator_fields():
    found = instance_type([Sample("cpu_limit_cores", "", 1.0), Sample("mem_limit_bytes", "", 3.5 * GIB)], [])
    assert found == {
        "id": "1cpu.3.5gib",
        "name": "1 CPU, 3.5 GiB",
        "memory_limit_mib": 3584,
        "millicpu_limit": 1000,
        "gpu_count": 0,
        "gpu_type": None,
        "gpu_memory_limit_mib": None,
    }


def test_a_tick_without_limits_describes_nothing():
    assert instance_type([Sample("net_rx_Bps", "", 10.0)], []) is None


def test_the_summary_is_reported_once_after_the_first_tick_with_limits_and_after_its_samples():
    events = []
    emit = reporting_hardware(
        lambda ts, samples: events.append(("samples", ts)), lambda found: events.append(("hardware", found)), []
    )
    emit(1, [Sample("net_rx_Bps", "", 1.0)])  # the limits come on a later tick
    emit(2, HOST)
    emit(3, HOST)
    assert [e[0] for e in events] == ["samples", "samples", "hardware", "samples"]
    assert events[2][1]["name"] == "32 CPUs, 256 GiB"


def test_a_failing_report_never_costs_a_tick():
    emitted = []

    def report(found):
        raise ConnectionError("the queue is gone")

    emit = reporting_hardware(lambda ts, samples: emitted.append(ts), report, [])
    for ts in range(5):
        emit(ts, HOST)
    assert emitted == [0, 1, 2, 3, 4]


# -- jobpulse run against a real server ----------------------------------------------------------------------


@pytest.fixture
def env(server, tmp_path):
    return child_env(server, tmp_path)


def run_worker(env: dict, job: str) -> None:
    argv = [sys.executable, "-m", "jobpulse", "run", "--project", "hardware", "--job", job, "--worker", "worker-0"]
    argv += ["--interval", "100ms", "--no-gpu", "--no-npu", "--", sys.executable, "-c", "import time; time.sleep(1)"]
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr


def test_jobpulse_run_gives_the_job_its_workers_hardware_and_baseten_shows_it(server, env):
    run_worker(env, "hardware-run")
    headers = {"Authorization": f"Bearer {server.api_key}"}
    job = httpx.get(f"{server.url}/jp/v1/jobs/hardware-run", headers=headers).json()["job"]
    it = job["instance_type"]
    assert it["millicpu_limit"] > 0 and it["memory_limit_mib"] > 0 and it["gpu_count"] == 0
    assert it["name"].endswith(" GiB") and " CPU" in it["name"]
    metrics = f"{server.url}/v1/training_projects/hardware/jobs/hardware-run/metrics"
    training_job = httpx.get(metrics, headers=headers).json()["training_job"]
    assert training_job["instance_type"] == {**it, "gpu_type": None, "gpu_memory_limit_mib": None}
    assert training_job["node_count"] == 1


def test_a_job_given_an_instance_type_keeps_it(server, env):
    given = {"id": "a100x8", "name": "8x A100", "gpu_count": 8, "gpu_type": "A100"}
    headers = {"Authorization": f"Bearer {server.api_key}"}
    body = {"project": "hardware", "job": "hardware-given", "instance_type": given}
    assert httpx.post(f"{server.url}/jp/v1/jobs", json=body, headers=headers).status_code == 201
    run_worker(env, "hardware-given")
    job = httpx.get(f"{server.url}/jp/v1/jobs/hardware-given", headers=headers).json()["job"]
    assert job["instance_type"] == given and job["status"] == "completed"
