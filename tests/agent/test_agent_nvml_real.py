"""The NVIDIA collector against the real NVML; skipped where there is no driver or GPU."""

import shutil
import subprocess

import pynvml
import pytest

from jobpulse.agent.nvidia import NvidiaCollector


@pytest.fixture
def nvml():
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as exc:
        pytest.skip(f"no NVIDIA driver or GPU here: {exc}")
    try:
        count = pynvml.nvmlDeviceGetCount()
    finally:
        pynvml.nvmlShutdown()
    if count == 0:
        pytest.skip("NVML found no GPU")
    return pynvml


def test_real_gpus_report_memory_and_utilization(nvml):
    collector = NvidiaCollector(nvml)
    try:
        collector.collect(0.0)
        samples = collector.collect(1.0)
    finally:
        collector.close()
    metrics = {(s.metric, s.device) for s in samples}
    for target in collector.targets:
        assert ("gpu_mem_bytes", target.label) in metrics
        assert ("gpu_mem_total_bytes", target.label) in metrics
        if target.mig is None:
            assert ("gpu_util", target.label) in metrics
    for s in samples:
        if s.metric in ("gpu_util", "gpu_mem_util"):
            assert 0.0 <= s.value <= 100.0


def test_real_gpu_memory_is_what_nvidia_smi_prints(nvml):
    smi = shutil.which("nvidia-smi")
    if smi is None:
        pytest.skip("nvidia-smi is not installed")
    collector = NvidiaCollector(nvml, env={})
    try:
        values = {(s.metric, s.device): s.value for s in collector.collect(0.0)}
        printed = subprocess.run(
            [smi, "--query-gpu=index,memory.used,memory.total", "--format=csv,noheader,nounits"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    finally:
        collector.close()
    mib = 1 << 20
    for line in printed.strip().splitlines():
        index, used, total = (int(part) for part in line.split(","))
        if ("gpu_mem_bytes", str(index)) not in values:  # a MIG-enabled GPU reports per instance
            continue
        assert abs(values[("gpu_mem_bytes", str(index))] / mib - used) <= 1
        assert abs(values[("gpu_mem_total_bytes", str(index))] / mib - total) <= 1
