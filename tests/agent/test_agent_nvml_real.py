"""The NVIDIA collector against the real NVML; skipped where there is no driver or GPU."""

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
