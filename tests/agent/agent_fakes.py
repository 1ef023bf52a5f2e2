"""Stand-ins for the agent's data sources, fed by recorded output.

``FakeNvml`` answers the pynvml calls the NVIDIA collector makes with the values of an
``nvidia-smi -q`` report (plus ``nvidia-smi -L`` for MIG UUIDs), in the types the real module
returns: ``c_nvmlUtilization_t``, ``c_nvmlMemory_t`` (bytes), milliwatts, °C, MHz, ``NVMLError``
subclasses with NVML's error codes. Handles are opaque objects, as NVML's are.
"""

from __future__ import annotations

import ctypes
import re
import shutil
from collections import Counter
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pynvml

DATA = Path(__file__).parent / "data"
MIB = 1 << 20


def stage(src: Path, dest: Path) -> Path:
    """Copy a recorded snapshot tree over ``dest`` (replacing files of an earlier snapshot)."""
    shutil.copytree(src, dest, dirs_exist_ok=True)
    return dest


# -- nvidia-smi -q --------------------------------------------------------------------------


def parse_smi_q(text: str) -> list[dict]:
    """The GPU sections of an ``nvidia-smi -q`` report as nested dicts (repeated sections as lists)."""
    gpus: list[dict] = []
    stack: list[tuple[int, dict]] = []
    for line in text.splitlines():
        if not line.strip() or line.startswith("="):
            continue
        m = re.match(r"^GPU ([0-9A-Fa-f:.]+)$", line)
        if m:
            gpu: dict = {"bus_id": m.group(1)}
            gpus.append(gpu)
            stack = [(-1, gpu)]
            continue
        if not stack:
            continue
        indent = len(line) - len(line.lstrip(" "))
        key, sep, value = line.strip().partition(":")
        key = key.strip()
        while stack and stack[-1][0] >= indent:
            stack.pop()
        parent = stack[-1][1]
        if sep and value.strip():
            parent[key] = value.strip()
            continue
        section: dict = {}
        if key in parent:
            existing = parent[key]
            parent[key] = (existing if isinstance(existing, list) else [existing]) + [section]
        else:
            parent[key] = section
        stack.append((indent, section))
    return gpus


def parse_smi_l(text: str) -> dict[int, list[str]]:
    """``{gpu index: [MIG UUID by MIG device index]}`` from ``nvidia-smi -L``."""
    out: dict[int, list[str]] = {}
    current = -1
    for line in text.splitlines():
        m = re.match(r"^GPU (\d+):", line)
        if m:
            current = int(m.group(1))
            out[current] = []
            continue
        m = re.search(r"Device\s+(\d+): \(UUID: (MIG-[^)]+)\)", line)
        if m and current >= 0:
            out[current].append(m.group(2))
    return out


def _num(text: str) -> float | None:
    m = re.match(r"^(-?\d+(?:\.\d+)?)", text)
    return float(m.group(1)) if m else None


class Handle:
    def __init__(self, gpu: int, mig: int | None = None) -> None:
        self.gpu = gpu
        self.mig = mig

    def __repr__(self) -> str:
        return f"<handle gpu={self.gpu} mig={self.mig}>"


class FakeNvml:
    """A pynvml look-alike over recorded ``nvidia-smi`` reports."""

    NVMLError = pynvml.NVMLError

    def __init__(
        self,
        smi_q: str,
        smi_l: str | None = None,
        *,
        gpm: dict[tuple[int, int | None], tuple[float, float]] | None = None,
        gpm_supported: bool = True,
        fail: dict[str, int] | None = None,
    ) -> None:
        self.gpus = parse_smi_q(smi_q)
        self.mig_uuids = parse_smi_l(smi_l) if smi_l else {}
        self.gpm = gpm or {}
        self.gpm_supported = gpm_supported
        self.fail = fail or {}  # function name -> NVML error code to raise
        self.calls: Counter[str] = Counter()
        self.events: list[SimpleNamespace] = []
        self.registered: set[int] = set()
        self._samples: dict[int, tuple[Any, int]] = {}
        self._buffers: list[Any] = []
        self._sample_seq = 0
        self.initialized = False

    def __getattr__(self, name: str) -> Any:
        if name.startswith(("NVML_", "c_nvml", "nvmlEventType", "nvmlMemory_")):
            return getattr(pynvml, name)
        raise AttributeError(name)

    # -- helpers ------------------------------------------------------------------------

    def _enter(self, name: str) -> None:
        self.calls[name] += 1
        if not self.initialized and name != "nvmlInit":
            raise pynvml.NVMLError(pynvml.NVML_ERROR_UNINITIALIZED)
        if name in self.fail:
            raise pynvml.NVMLError(self.fail[name])

    def _gpu(self, h: Handle) -> dict:
        return self.gpus[h.gpu]

    def _migs(self, gpu: dict) -> list[dict]:
        devs = gpu.get("MIG Device", [])
        return devs if isinstance(devs, list) else [devs]

    def _section(self, h: Handle) -> dict:
        gpu = self._gpu(h)
        return self._migs(gpu)[h.mig] if h.mig is not None else gpu

    @staticmethod
    def _unsupported() -> pynvml.NVMLError:
        return pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)

    def inject_xid(self, gpu: int, xid: int, gpu_instance: int = 0xFFFFFFFF) -> None:
        self.events.append(
            SimpleNamespace(
                device=Handle(gpu),
                eventType=pynvml.nvmlEventTypeXidCriticalError,
                eventData=xid,
                gpuInstanceId=gpu_instance,
                computeInstanceId=0xFFFFFFFF,
            )
        )

    # -- the pynvml functions the collector uses ----------------------------------------

    def nvmlInit(self) -> None:
        self._enter("nvmlInit")
        self.initialized = True

    def nvmlShutdown(self) -> None:
        self._enter("nvmlShutdown")
        self.initialized = False

    def nvmlDeviceGetCount(self) -> int:
        self._enter("nvmlDeviceGetCount")
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> Handle:
        self._enter("nvmlDeviceGetHandleByIndex")
        if not 0 <= index < len(self.gpus):
            raise pynvml.NVMLError(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        return Handle(index)

    def nvmlDeviceGetUUID(self, h: Handle) -> str:
        self._enter("nvmlDeviceGetUUID")
        if h.mig is not None:
            return self.mig_uuids[h.gpu][h.mig]
        return self._gpu(h)["GPU UUID"]

    def nvmlDeviceGetName(self, h: Handle) -> str:
        self._enter("nvmlDeviceGetName")
        return self._gpu(h)["Product Name"]  # a MIG instance: its GPU's product (NVML adds the MIG profile)

    def nvmlDeviceGetMigMode(self, h: Handle) -> list[int]:
        self._enter("nvmlDeviceGetMigMode")
        mode = self._gpu(h).get("MIG Mode", {})
        state = [1 if mode.get(k) == "Enabled" else 0 for k in ("Current", "Pending")]
        return state

    def nvmlDeviceGetMaxMigDeviceCount(self, h: Handle) -> int:
        self._enter("nvmlDeviceGetMaxMigDeviceCount")
        return 7

    def nvmlDeviceGetMigDeviceHandleByIndex(self, h: Handle, index: int) -> Handle:
        self._enter("nvmlDeviceGetMigDeviceHandleByIndex")
        if index >= len(self._migs(self._gpu(h))):
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_FOUND)
        return Handle(h.gpu, index)

    def nvmlDeviceGetGpuInstanceId(self, h: Handle) -> int:
        self._enter("nvmlDeviceGetGpuInstanceId")
        return int(self._section(h)["GPU Instance ID"])

    def nvmlDeviceGetComputeInstanceId(self, h: Handle) -> int:
        self._enter("nvmlDeviceGetComputeInstanceId")
        return int(self._section(h)["Compute Instance ID"])

    def nvmlDeviceGetUtilizationRates(self, h: Handle) -> pynvml.c_nvmlUtilization_t:
        self._enter("nvmlDeviceGetUtilizationRates")
        if h.mig is not None:
            raise self._unsupported()
        util = self._gpu(h)["Utilization"]
        gpu, mem = _num(util.get("GPU", util.get("Gpu", ""))), _num(util["Memory"])  # 580 drivers print "GPU"
        if gpu is None or mem is None:
            raise self._unsupported()
        return pynvml.c_nvmlUtilization_t(gpu=int(gpu), memory=int(mem))

    def nvmlDeviceGetMemoryInfo(self, h: Handle, version: int | None = None) -> Any:
        self._enter("nvmlDeviceGetMemoryInfo" if not version else "nvmlDeviceGetMemoryInfo_v2")
        fb = self._section(h)["FB Memory Usage"]
        total, reserved, free, used = (int(_num(fb[k]) or 0) * MIB for k in ("Total", "Reserved", "Free", "Used"))
        if version:
            if version != pynvml.nvmlMemory_v2:
                raise pynvml.NVMLError(pynvml.NVML_ERROR_ARGUMENT_VERSION_MISMATCH)
            # nvidia-smi prints the v2 figures: used leaves out the driver's reserve.
            return pynvml.c_nvmlMemory_v2_t(version=version, total=total, reserved=reserved, free=free, used=used)
        # The v1 call counts the driver's reserve as used: used = total - free.
        return pynvml.c_nvmlMemory_t(total=total, free=free, used=total - free)

    def nvmlDeviceGetPowerUsage(self, h: Handle) -> int:
        self._enter("nvmlDeviceGetPowerUsage")
        if h.mig is not None:
            raise self._unsupported()
        readings = self._gpu(h)["GPU Power Readings"]
        # Drivers that print an average and an instantaneous draw return the average here (the 1 s mean NVML
        # documents for Ampere and later); older ones print one "Power Draw".
        watts = _num(readings.get("Average Power Draw", readings.get("Power Draw", "")))
        if watts is None:
            raise self._unsupported()
        return int(round(watts * 1000))

    def nvmlDeviceGetTemperature(self, h: Handle, sensor: int) -> int:
        self._enter("nvmlDeviceGetTemperature")
        if h.mig is not None or sensor != pynvml.NVML_TEMPERATURE_GPU:
            raise self._unsupported()
        return int(_num(self._gpu(h)["Temperature"]["GPU Current Temp"]) or 0)

    def nvmlDeviceGetClockInfo(self, h: Handle, clock: int) -> int:
        self._enter("nvmlDeviceGetClockInfo")
        if h.mig is not None or clock != pynvml.NVML_CLOCK_SM:
            raise self._unsupported()
        return int(_num(self._gpu(h)["Clocks"]["SM"]) or 0)

    def nvmlDeviceGetTotalEccErrors(self, h: Handle, error_type: int, counter: int) -> int:
        self._enter("nvmlDeviceGetTotalEccErrors")
        if h.mig is not None:
            raise self._unsupported()
        ecc = self._gpu(h)["ECC Errors"]["Volatile" if counter == pynvml.NVML_VOLATILE_ECC else "Aggregate"]
        if error_type == pynvml.NVML_MEMORY_ERROR_TYPE_CORRECTED:
            keys = ("SRAM Correctable", "DRAM Correctable")
        else:
            keys = ("SRAM Uncorrectable Parity", "SRAM Uncorrectable SEC-DED", "DRAM Uncorrectable")
        return sum(int(_num(ecc.get(k, "0")) or 0) for k in keys)

    # GPM: each sample remembers its device and order; metrics between two samples are the
    # activity given for that device (or MIG GPU instance) in ``gpm``.

    def nvmlGpmQueryDeviceSupport(self, h: Handle) -> pynvml.c_nvmlGpmSupport_t:
        self._enter("nvmlGpmQueryDeviceSupport")
        support = pynvml.c_nvmlGpmSupport_t()
        support.version = pynvml.NVML_GPM_SUPPORT_VERSION
        hopper = self._gpu(h).get("Product Architecture") == "Hopper"
        support.isSupportedDevice = int(self.gpm_supported and hopper)
        return support

    def nvmlGpmSampleAlloc(self) -> Any:
        self._enter("nvmlGpmSampleAlloc")
        buf = ctypes.c_uint64(0)
        self._buffers.append(buf)
        return ctypes.cast(ctypes.pointer(buf), pynvml.c_nvmlGpmSample_t)

    def nvmlGpmSampleFree(self, sample: Any) -> None:
        self._enter("nvmlGpmSampleFree")

    def _record(self, sample: Any, key: tuple[int, int | None]) -> Any:
        self._sample_seq += 1
        self._samples[ctypes.cast(sample, ctypes.c_void_p).value] = (key, self._sample_seq)
        return sample

    def nvmlGpmSampleGet(self, h: Handle, sample: Any) -> Any:
        self._enter("nvmlGpmSampleGet")
        return self._record(sample, (h.gpu, None))

    def nvmlGpmMigSampleGet(self, h: Handle, gpu_instance: int, sample: Any) -> Any:
        self._enter("nvmlGpmMigSampleGet")
        return self._record(sample, (h.gpu, gpu_instance))

    def nvmlGpmMetricsGet(self, request: Any) -> Any:
        self._enter("nvmlGpmMetricsGet")
        first = self._samples[ctypes.cast(request.sample1, ctypes.c_void_p).value]
        second = self._samples[ctypes.cast(request.sample2, ctypes.c_void_p).value]
        if first[0] != second[0] or first[1] >= second[1]:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        graphics, sm = self.gpm.get(first[0], (0.0, 0.0))
        for i in range(request.numMetrics):
            metric = request.metrics[i]
            if metric.metricId == pynvml.NVML_GPM_METRIC_GRAPHICS_UTIL:
                metric.value, metric.nvmlReturn = graphics, pynvml.NVML_SUCCESS
            elif metric.metricId == pynvml.NVML_GPM_METRIC_SM_UTIL:
                metric.value, metric.nvmlReturn = sm, pynvml.NVML_SUCCESS
            else:
                metric.nvmlReturn = pynvml.NVML_ERROR_NOT_SUPPORTED
        return request

    # XID events

    def nvmlEventSetCreate(self) -> object:
        self._enter("nvmlEventSetCreate")
        return object()

    def nvmlDeviceRegisterEvents(self, h: Handle, types: int, event_set: object) -> None:
        self._enter("nvmlDeviceRegisterEvents")
        self.registered.add(h.gpu)

    def nvmlEventSetWait_v2(self, event_set: object, timeout_ms: int) -> SimpleNamespace:
        self._enter("nvmlEventSetWait_v2")
        while self.events:
            event = self.events.pop(0)
            if event.device.gpu in self.registered:
                return event
        raise pynvml.NVMLError(pynvml.NVML_ERROR_TIMEOUT)

    def nvmlEventSetFree(self, event_set: object) -> None:
        self._enter("nvmlEventSetFree")


def h100x8(**kwargs: Any) -> FakeNvml:
    """Eight H100s under a training load, from ``data/nvidia_smi_q_h100x8.txt``."""
    return FakeNvml((DATA / "nvidia_smi_q_h100x8.txt").read_text(), **kwargs)


def h100_driver580(**kwargs: Any) -> FakeNvml:
    """One H100 under a Lightning training load, recorded with driver 580 (``data/nvidia_smi_q_h100_driver580.txt``)."""
    return FakeNvml((DATA / "nvidia_smi_q_h100_driver580.txt").read_text(), **kwargs)


def h100_mig(**kwargs: Any) -> FakeNvml:
    """An H100 split into two MIG instances and a whole H100, from ``data/nvidia_smi_*_h100_mig.txt``."""
    return FakeNvml(
        (DATA / "nvidia_smi_q_h100_mig.txt").read_text(),
        (DATA / "nvidia_smi_L_h100_mig.txt").read_text(),
        **kwargs,
    )


class Recorded:
    """A recorded snapshot series (``t0``, ``t1``) staged into one directory, one snapshot at a time."""

    def __init__(self, name: str, tmp_path: Path) -> None:
        self.src = DATA / name
        self.root = tmp_path / name
        self.root.mkdir(parents=True, exist_ok=True)
        interval = self.src / "interval.txt"
        self.interval = float(interval.read_text()) if interval.exists() else 1.0

    def load(self, snap: str) -> Path:
        return stage(self.src / snap, self.root)

    @property
    def proc(self) -> Path:
        return self.root / "proc"

    @property
    def cgroup(self) -> Path:
        return self.root / "sys/fs/cgroup"

    @property
    def sys(self) -> Path:
        return self.root / "sys"
