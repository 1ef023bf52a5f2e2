import pynvml
import pytest
from agent_fakes import MIB, h100_driver580, h100_mig, h100x8

from jobpulse.agent.nvidia import NvidiaCollector
from jobpulse.agent.nvidia_devices import GpuDevice, MigDevice, select_devices


def _by_device(samples):
    out: dict[str, dict[str, float]] = {}
    for s in samples:
        out.setdefault(s.device, {})[s.metric] = s.value
    return out


def test_eight_gpus_report_the_recorded_values():
    collector = NvidiaCollector(h100x8(), env={})
    values = _by_device(collector.collect(0.0))
    assert sorted(values) == [str(i) for i in range(8)]
    gpu0 = values["0"]
    assert gpu0["gpu_util"] == 100.0
    assert gpu0["gpu_mem_bw_util"] == 47.0
    assert gpu0["gpu_mem_bytes"] == 77518 * MIB  # "Used", without the 328 MiB reserve
    assert gpu0["gpu_mem_total_bytes"] == 81559 * MIB
    assert gpu0["gpu_mem_util"] == pytest.approx(100 * 77518 / 81559)
    assert gpu0["gpu_power_w"] == pytest.approx(663.42)
    assert gpu0["gpu_temp_c"] == 52.0
    assert gpu0["gpu_sm_clock_mhz"] == 1980.0
    assert values["5"]["gpu_ecc_corrected"] == 2.0
    assert values["5"]["gpu_ecc_uncorrected"] == 0.0
    assert values["7"]["gpu_mem_bytes"] == 61204 * MIB


def test_a_recorded_driver_580_report_reads_as_nvidia_smi_printed_it():
    collector = NvidiaCollector(h100_driver580(), env={})
    values = _by_device(collector.collect(0.0))["0"]
    assert (values["gpu_util"], values["gpu_mem_bw_util"]) == (100.0, 76.0)
    assert values["gpu_mem_bytes"] == 15445 * MIB  # "Used"; the 480 MiB reserve is apart
    assert values["gpu_mem_total_bytes"] == 81559 * MIB
    assert values["gpu_power_w"] == pytest.approx(684.02)  # the average draw, not the instantaneous 647.68
    assert (values["gpu_temp_c"], values["gpu_sm_clock_mhz"]) == (57.0, 1965.0)
    assert (values["gpu_ecc_corrected"], values["gpu_ecc_uncorrected"]) == (0.0, 0.0)


def test_old_driver_without_memory_v2_falls_back_to_v1():
    nvml = h100x8(fail={"nvmlDeviceGetMemoryInfo_v2": pynvml.NVML_ERROR_FUNCTION_NOT_FOUND})
    collector = NvidiaCollector(nvml, env={})
    collector.collect(0.0)
    values = _by_device(collector.collect(1.0))
    assert values["0"]["gpu_mem_bytes"] == (81559 - 3713) * MIB  # v1: total - free
    assert nvml.calls["nvmlDeviceGetMemoryInfo_v2"] == 8  # tried once per device, then not again


def test_cuda_visible_devices_maps_job_indices_to_physical_gpus():
    collector = NvidiaCollector(h100x8(), env={"CUDA_VISIBLE_DEVICES": "6,2"})
    values = _by_device(collector.collect(0.0))
    assert sorted(values) == ["0", "1"]
    assert values["0"]["gpu_power_w"] == pytest.approx(630.14)  # physical 6
    assert values["1"]["gpu_power_w"] == pytest.approx(689.05)  # physical 2


def test_cuda_visible_devices_by_uuid_and_unique_prefix():
    env = {"CUDA_VISIBLE_DEVICES": "GPU-e1f2a3b4-c5d6-4e7f-8a9b-0c1d2e3f4a5b,GPU-9f8e"}
    collector = NvidiaCollector(h100x8(), env=env)
    assert [(t.label, t.gpu.index) for t in collector.targets] == [("0", 7), ("1", 5)]


def test_cuda_visible_devices_stops_at_the_first_unknown_entry():
    collector = NvidiaCollector(h100x8(), env={"CUDA_VISIBLE_DEVICES": "1,9,2"})
    assert [(t.label, t.gpu.index) for t in collector.targets] == [("0", 1)]


def test_empty_cuda_visible_devices_means_no_gpu():
    assert NvidiaCollector.create(h100x8(), env={"CUDA_VISIBLE_DEVICES": ""}) is None


def test_nvidia_visible_devices_narrows_when_the_agent_sees_all_gpus():
    env = {"NVIDIA_VISIBLE_DEVICES": "4,5", "CUDA_VISIBLE_DEVICES": "1"}
    collector = NvidiaCollector(h100x8(), env=env)
    assert [(t.label, t.gpu.index) for t in collector.targets] == [("0", 5)]


def test_nvidia_visible_devices_already_applied_inside_the_container():
    gpus = [GpuDevice(0, "GPU-a"), GpuDevice(1, "GPU-b")]
    targets = select_devices(gpus, None, "6,7")  # host indices; the container shows 2 GPUs
    assert [(t.label, t.gpu.uuid) for t in targets] == [("0", "GPU-a"), ("1", "GPU-b")]


def test_mig_instance_by_uuid_reports_memory_and_gpm_activity():
    nvml = h100_mig(gpm={(0, 2): (63.5, 41.25)})
    env = {"CUDA_VISIBLE_DEVICES": "MIG-d4c3b2a1-0f9e-5d8c-a7b6-5e4d3c2b1a09"}
    collector = NvidiaCollector(nvml, env=env)
    first = _by_device(collector.collect(0.0))["0"]
    assert "gpu_util" not in first  # GPM needs two samples
    assert first["gpu_mem_bytes"] == 12 * MIB
    assert first["gpu_mem_total_bytes"] == 40448 * MIB
    second = _by_device(collector.collect(1.0))["0"]
    assert second["gpu_util"] == 63.5
    assert second["gpu_sm_util"] == 41.25
    assert "gpu_power_w" not in second and "gpu_temp_c" not in second  # whole-GPU readings


def test_mig_legacy_name_selects_the_instance():
    env = {"CUDA_VISIBLE_DEVICES": "MIG-GPU-2b7c9e41-5d3a-4f86-a1c0-8e9d7b6a5f43/1/0"}
    collector = NvidiaCollector(h100_mig(), env=env)
    assert [(t.label, t.mig.gpu_instance) for t in collector.targets] == [("0", 1)]


def test_whole_gpu_next_to_a_mig_gpu():
    collector = NvidiaCollector(h100_mig(), env={"CUDA_VISIBLE_DEVICES": "GPU-8a9b0c1d-2e3f-4a5b-8c6d-7e8f9a0b1c2d"})
    values = _by_device(collector.collect(0.0))
    assert values["0"]["gpu_util"] == 98.0 and values["0"]["gpu_power_w"] == pytest.approx(641.17)


def test_unsupported_calls_are_not_repeated():
    nvml = h100_mig()
    collector = NvidiaCollector(nvml, env={"CUDA_VISIBLE_DEVICES": "MIG-6e0f"})
    for t in range(5):
        collector.collect(float(t))
    assert nvml.calls["nvmlDeviceGetUtilizationRates"] == 1
    assert nvml.calls["nvmlDeviceGetPowerUsage"] == 1
    assert nvml.calls["nvmlDeviceGetMemoryInfo_v2"] == 5


def test_handles_are_opened_once():
    nvml = h100x8()
    collector = NvidiaCollector(nvml, env={})
    for t in range(10):
        collector.collect(float(t))
    assert nvml.calls["nvmlDeviceGetHandleByIndex"] == 8
    assert nvml.calls["nvmlInit"] == 1


def test_ecc_is_read_every_nth_sample():
    nvml = h100x8()
    collector = NvidiaCollector(nvml, env={"CUDA_VISIBLE_DEVICES": "0"}, ecc_every=5)
    metrics = [{s.metric for s in collector.collect(float(t))} for t in range(6)]
    assert ["gpu_ecc_corrected" in m for m in metrics] == [True, False, False, False, False, True]


def test_xid_events_are_counted_per_job_device():
    nvml = h100x8()
    collector = NvidiaCollector(nvml, env={"CUDA_VISIBLE_DEVICES": "3,4"})
    assert _by_device(collector.collect(0.0))["1"]["gpu_xid_errors"] == 0.0
    nvml.inject_xid(4, 79)
    nvml.inject_xid(4, 48)
    nvml.inject_xid(0, 13)  # not the job's GPU
    values = _by_device(collector.collect(1.0))
    assert values["1"]["gpu_xid_errors"] == 2.0
    assert values["1"]["gpu_xid"] == 48.0
    assert values["0"]["gpu_xid_errors"] == 0.0 and "gpu_xid" not in values["0"]


def test_a_failing_call_gives_fewer_samples():
    nvml = h100x8(fail={"nvmlDeviceGetPowerUsage": pynvml.NVML_ERROR_GPU_IS_LOST})
    values = _by_device(NvidiaCollector(nvml, env={}).collect(0.0))
    assert "gpu_power_w" not in values["0"] and values["0"]["gpu_util"] == 100.0


def test_no_driver_gives_no_collector():
    nvml = h100x8(fail={"nvmlInit": pynvml.NVML_ERROR_LIBRARY_NOT_FOUND})
    assert NvidiaCollector.create(nvml, env={}) is None


def test_close_shuts_nvml_down():
    nvml = h100x8()
    NvidiaCollector(nvml, env={}).close()
    assert nvml.calls["nvmlShutdown"] == 1 and nvml.calls["nvmlEventSetFree"] == 1


def test_select_devices_skips_duplicates_and_keeps_order():
    gpus = [GpuDevice(i, f"GPU-{i}") for i in range(4)]
    gpus[1].migs.append(MigDevice(0, "MIG-x", 3, 0))
    targets = select_devices(gpus, "3,MIG-x,3,0", None)
    assert [(t.label, t.gpu.index, t.mig is not None) for t in targets] == [
        ("0", 3, False),
        ("1", 1, True),
        ("2", 0, False),
    ]
