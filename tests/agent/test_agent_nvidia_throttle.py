"""``gpu_throttle_thermal``, ``gpu_throttle_power`` and ``gpu_power_capped``: NVML's current clock event reasons
(throttle reasons before driver 535), over the recorded ``nvidia-smi -q`` reports of the fake NVML."""

from typing import Any

import pynvml
from agent_fakes import DATA, FakeNvml, Handle, h100_driver580

from jobpulse.agent.nvidia import NvidiaCollector

# ``nvidia-smi -q`` names of the reasons, and their bits
BITS = {
    "Idle": 0x1,
    "Applications Clocks Setting": 0x2,
    "SW Power Cap": 0x4,
    "HW Slowdown": 0x8,
    "Sync Boost": 0x10,
    "SW Thermal Slowdown": 0x20,
    "HW Thermal Slowdown": 0x40,
    "HW Power Brake Slowdown": 0x80,
    "Display Clock Setting": 0x100,
}


class ReasonsNvml(FakeNvml):
    """The fake NVML with the clock event reasons of each GPU: those its report recorded, or ``reasons``; with
    ``legacy`` only the older throttle-reasons call (a pynvml before 12.535)."""

    def __init__(self, smi_q: str, *, reasons: dict[int, int] | None = None, legacy: bool = False, **kw: Any) -> None:
        super().__init__(smi_q, **kw)
        self.reasons = reasons or {}
        self.legacy = legacy

    def __getattr__(self, name: str) -> Any:
        current = name == "nvmlDeviceGetCurrentClocksEventReasons" and not self.legacy
        if current or name == "nvmlDeviceGetCurrentClocksThrottleReasons":
            return lambda h: self._reasons(name, h)
        return super().__getattr__(name)

    def _reasons(self, name: str, h: Handle) -> int:
        self._enter(name)
        if h.mig is not None:
            raise self._unsupported()  # NVML answers the reasons of whole GPUs
        if h.gpu in self.reasons:
            return self.reasons[h.gpu]
        recorded = self._gpu(h).get("Clocks Event Reasons") or self._gpu(h).get("Clocks Throttle Reasons")
        if recorded is None:
            raise self._unsupported()
        return sum(bit for key, bit in BITS.items() if recorded.get(key) == "Active")


def readings(collector: NvidiaCollector) -> dict[str, dict[str, float]]:
    values: dict[str, dict[str, float]] = {}
    for s in collector.collect(0.0):
        values.setdefault(s.device, {})[s.metric] = s.value
    return values


def flags(collector: NvidiaCollector) -> dict[str, tuple[float, float]]:
    return {
        d: (v["gpu_throttle_thermal"], v["gpu_throttle_power"])
        for d, v in readings(collector).items()
        if "gpu_throttle_power" in v
    }


def test_the_recorded_sw_power_cap_under_full_load_is_capped_not_throttled():
    nvml = ReasonsNvml((DATA / "nvidia_smi_q_h100_driver580.txt").read_text())
    values = readings(NvidiaCollector(nvml, env={}))["0"]
    assert (values["gpu_throttle_thermal"], values["gpu_throttle_power"], values["gpu_power_capped"]) == (0, 0, 1)


def test_thermal_slowdown_in_software_or_hardware_is_thermal_throttling():
    text = (DATA / "nvidia_smi_q_h100x8.txt").read_text()
    reasons = {gpu: 0x1 for gpu in range(8)} | {1: 0x20, 2: 0x40, 3: 0x40 | 0x4, 4: 0x80, 5: 0x8 | 0x10 | 0x100}
    collector = NvidiaCollector(ReasonsNvml(text, reasons=reasons), env={})
    found = flags(collector)
    assert found["0"] == (0.0, 0.0)  # idle is no throttling
    # 3: hardware thermal slowdown while capped is thermal throttling only; 4: the power brake is power throttling
    assert (found["1"], found["2"], found["3"], found["4"]) == ((1.0, 0.0), (1.0, 0.0), (1.0, 0.0), (0.0, 1.0))
    assert found["5"] == (0.0, 0.0)  # "HW Slowdown" alone says neither which cause, sync boost and display no throttle


def test_an_older_pynvml_is_read_through_the_throttle_reasons_call():
    nvml = ReasonsNvml((DATA / "nvidia_smi_q_h100x8.txt").read_text(), reasons={0: 0x40}, legacy=True)
    collector = NvidiaCollector(nvml, env={"CUDA_VISIBLE_DEVICES": "0"})
    assert flags(collector) == {"0": (1.0, 0.0)}
    assert nvml.calls["nvmlDeviceGetCurrentClocksThrottleReasons"] == 1


def test_a_gpu_without_the_reasons_sends_no_flags_and_is_not_asked_again():
    nvml = ReasonsNvml((DATA / "nvidia_smi_q_h100x8.txt").read_text(), reasons={0: 0x20})
    collector = NvidiaCollector(nvml, env={"CUDA_VISIBLE_DEVICES": "0,1"})
    assert flags(collector) == {"0": (1.0, 0.0)}  # GPU 1's report has no reasons: NVML says "not supported"
    collector.collect(1.0)
    assert nvml.calls["nvmlDeviceGetCurrentClocksEventReasons"] == 3  # GPU 0 twice, GPU 1 once
    assert nvml.calls["nvmlDeviceGetCurrentClocksThrottleReasons"] == 1  # GPU 1's older call, once


def test_a_failed_reading_sends_nothing_this_time_only():
    nvml = ReasonsNvml(
        (DATA / "nvidia_smi_q_h100x8.txt").read_text(),
        reasons={0: 0x80},
        fail={"nvmlDeviceGetCurrentClocksEventReasons": pynvml.NVML_ERROR_GPU_IS_LOST},
    )
    collector = NvidiaCollector(nvml, env={"CUDA_VISIBLE_DEVICES": "0"})
    assert flags(collector) == {}
    del nvml.fail["nvmlDeviceGetCurrentClocksEventReasons"]
    assert flags(collector) == {"0": (0.0, 1.0)}


def test_a_mig_instance_reports_the_reasons_of_its_gpu():
    nvml = ReasonsNvml(
        (DATA / "nvidia_smi_q_h100_mig.txt").read_text(),
        smi_l=(DATA / "nvidia_smi_L_h100_mig.txt").read_text(),
        reasons={0: 0x40, 1: 0x0},
    )
    env = {"CUDA_VISIBLE_DEVICES": "MIG-d4c3b2a1-0f9e-5d8c-a7b6-5e4d3c2b1a09"}  # an instance of GPU 0
    collector = NvidiaCollector(nvml, env=env, use_gpm=False)
    assert collector.targets[0].mig is not None
    assert flags(collector) == {"0": (1.0, 0.0)}


def test_the_recorded_gpus_without_the_call_send_no_flags():
    assert flags(NvidiaCollector(h100_driver580(), env={})) == {}  # a pynvml without either call
