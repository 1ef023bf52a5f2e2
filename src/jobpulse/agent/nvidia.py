"""NVIDIA GPUs through NVML (the ``pynvml`` module of the ``nvidia-ml-py`` package).

Only the devices the job uses are sampled, and ``device`` is the index the job sees (its
rank-local CUDA index), not the physical one: which devices those are, from
``NVIDIA_VISIBLE_DEVICES`` and ``CUDA_VISIBLE_DEVICES``, MIG instances included, is decided
in ``jobpulse.agent.nvidia_devices``. GPM metrics come from ``jobpulse.agent.nvidia_gpm``,
throttle reasons from ``jobpulse.agent.nvidia_throttle``.

Metrics per device (``device`` = the job's index):

=========================== ========= ===============================================
``gpu_util``                %         time a kernel was running (NVML utilization); on
                                      a MIG instance, where NVML has no utilization,
                                      the GPM graphics-engine activity of the instance
``gpu_sm_util``             %         share of SMs busy (GPM, Hopper and later)
``gpu_mem_bw_util``         %         time device memory was being read or written
``gpu_mem_bytes``           bytes     device memory in use (of the MIG instance on MIG);
                                      without the driver's reserve when the driver
                                      reports it apart (NVML memory info v2)
``gpu_mem_total_bytes``     bytes     device memory size
``gpu_mem_util``            %         ``gpu_mem_bytes`` / ``gpu_mem_total_bytes``
``gpu_power_w``             W         board power draw
``gpu_temp_c``              °C        GPU core temperature
``gpu_sm_clock_mhz``        MHz       SM clock
``gpu_ecc_corrected``       count     volatile corrected ECC errors (since driver load)
``gpu_ecc_uncorrected``     count     volatile uncorrected ECC errors (since driver load)
``gpu_xid_errors``          count     critical XID events seen since the agent started
``gpu_xid``                 code      the XID number of the latest event, sent once
                                      per event
=========================== ========= ===============================================

A function that NVML reports as not supported on a device is not called again for it. Handles,
GPM sample buffers and the event set are created once and reused.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Mapping
from typing import Any

from jobpulse.agent.base import Sample
from jobpulse.agent.nvidia_devices import Target, discover_gpus, nvml_uuid, select_devices
from jobpulse.agent.nvidia_gpm import Gpm, gpm_readers
from jobpulse.agent.nvidia_throttle import CALLS as THROTTLE_CALLS
from jobpulse.agent.nvidia_throttle import throttle_samples

log = logging.getLogger("jobpulse.agent")

XID_EVENT = 0x8  # nvmlEventTypeXidCriticalError
ALL_INSTANCES = 0xFFFFFFFF


class NvidiaCollector:
    """Samples the job's NVIDIA devices. Use ``NvidiaCollector.create()`` to get None when there is no GPU."""

    def __init__(
        self,
        nvml: Any,
        *,
        env: Mapping[str, str] | None = None,
        gpus: str | None = None,
        ecc_every: int = 10,
        use_gpm: bool = True,
        watch_xid: bool = True,
    ) -> None:
        self.nvml = nvml
        env = os.environ if env is None else env
        self.ecc_every = max(1, ecc_every)
        self._count = 0
        self._unsupported: set[tuple[str, str]] = set()
        self._not_supported = getattr(nvml, "NVML_ERROR_NOT_SUPPORTED", 3)
        self._no_function = getattr(nvml, "NVML_ERROR_FUNCTION_NOT_FOUND", 13)
        nvml.nvmlInit()
        self.devices = discover_gpus(nvml)
        cuda = gpus if gpus is not None else env.get("CUDA_VISIBLE_DEVICES")
        self.targets = select_devices(self.devices, cuda, env.get("NVIDIA_VISIBLE_DEVICES"))
        self._gpm: dict[str, Gpm] = gpm_readers(nvml, self.targets) if use_gpm else {}
        self._events: Any = None
        self._xid_count: dict[str, int] = {}
        if watch_xid:
            self._setup_events()

    @classmethod
    def create(cls, nvml: Any = None, **kwargs: Any) -> NvidiaCollector | None:
        """A collector over the real NVML, or None (logged) when the library or a GPU is missing."""
        if nvml is None:
            try:
                import pynvml as nvml
            except ImportError:
                return None
        try:
            collector = cls(nvml, **kwargs)
        except Exception as exc:  # no driver, no library, no permission
            log.debug("NVML unavailable: %s", exc)
            return None
        if not collector.targets:
            collector.close()
            return None
        return collector

    # -- discovery ---------------------------------------------------------------------------

    def _setup_events(self) -> None:
        nvml = self.nvml
        try:
            events = nvml.nvmlEventSetCreate()
        except (nvml.NVMLError, AttributeError):
            return
        registered: set[int] = set()
        for t in self.targets:
            if t.gpu.index in registered:
                self._xid_count[t.label] = 0
                continue
            try:
                nvml.nvmlDeviceRegisterEvents(t.gpu.handle, XID_EVENT, events)
            except nvml.NVMLError as exc:
                log.debug("XID events unavailable on GPU %d: %s", t.gpu.index, exc)
                continue
            registered.add(t.gpu.index)
            self._xid_count[t.label] = 0
        if registered:
            self._events = events
        else:
            with contextlib.suppress(nvml.NVMLError):
                nvml.nvmlEventSetFree(events)

    # -- sampling ----------------------------------------------------------------------------

    def _call(self, label: str, name: str, *args: Any) -> Any:
        key = (label, name)
        if key in self._unsupported:
            return None
        nvml = self.nvml
        try:
            return getattr(nvml, name)(*args)
        except AttributeError:
            self._unsupported.add(key)
        except nvml.NVMLError as exc:
            if getattr(exc, "value", None) in (self._not_supported, self._no_function):
                self._unsupported.add(key)
        return None

    def device_names(self) -> list[str]:
        """The model of each of the job's devices as NVML names it (a MIG instance: its own name, else its GPU's)."""
        names = []
        for t in self.targets:
            name = self._call(t.label, "nvmlDeviceGetName", t.handle)
            if name is None and t.mig is not None:
                name = self._call(t.label + "/gpu", "nvmlDeviceGetName", t.gpu.handle)
            text = name.decode(errors="replace") if isinstance(name, bytes) else name
            names.append(str(text).strip() if text else "NVIDIA GPU")
        return names

    def _call_first(self, label: str, names: tuple[str, ...], *args: Any) -> Any:
        """``_call`` of the first of ``names`` that NVML has: the next is tried only where one is unsupported (a
        failure of this sample is answered None: the next would fail the same way)."""
        for name in names:
            if (label, name) in self._unsupported:
                continue
            value = self._call(label, name, *args)
            if (label, name) not in self._unsupported:
                return value
        return None

    def _temperature(self, t: Target) -> Any:
        sensor = getattr(self.nvml, "NVML_TEMPERATURE_GPU", 0)
        # Drivers that dropped the old entry point have the versioned one.
        names = ("nvmlDeviceGetTemperature", "nvmlDeviceGetTemperatureV")
        return self._call_first(t.label, names, t.handle, sensor)

    def _memory(self, t: Target) -> Any:
        """Memory info, v2 (``used`` without the driver's reserve, as nvidia-smi shows) where the
        driver has it, else v1 (whose ``used`` includes that reserve)."""
        key = (t.label, "memory_v2")
        if key not in self._unsupported:
            nvml = self.nvml
            version = getattr(nvml, "nvmlMemory_v2", None)
            if version is None:
                self._unsupported.add(key)
            else:
                try:
                    return nvml.nvmlDeviceGetMemoryInfo(t.handle, version=version)
                except TypeError:
                    self._unsupported.add(key)
                except nvml.NVMLError as exc:
                    if getattr(exc, "value", None) not in (
                        self._not_supported,
                        self._no_function,
                        getattr(nvml, "NVML_ERROR_ARGUMENT_VERSION_MISMATCH", 25),
                    ):
                        return None
                    self._unsupported.add(key)
        return self._call(t.label, "nvmlDeviceGetMemoryInfo", t.handle)

    def _xid(self) -> list[Sample]:
        if self._events is None:
            return []
        nvml = self.nvml
        latest: dict[str, int] = {}
        for _ in range(256):
            try:
                data = nvml.nvmlEventSetWait_v2(self._events, 0)
            except nvml.NVMLError:
                break  # NVML_ERROR_TIMEOUT: nothing pending
            except AttributeError:  # a pynvml without the call
                self._events = None
                break
            if not data.eventType & XID_EVENT:
                continue
            try:
                uuid = nvml_uuid(nvml.nvmlDeviceGetUUID(data.device))
            except (nvml.NVMLError, AttributeError):
                continue
            instance = getattr(data, "gpuInstanceId", ALL_INSTANCES)
            for t in self.targets:
                if t.gpu.uuid != uuid or t.label not in self._xid_count:
                    continue
                if t.mig and instance != ALL_INSTANCES and t.mig.gpu_instance != instance:
                    continue
                self._xid_count[t.label] += 1
                latest[t.label] = int(data.eventData)
        if self._events is None:
            return []
        out = [Sample("gpu_xid_errors", label, float(n)) for label, n in self._xid_count.items()]
        out.extend(Sample("gpu_xid", label, float(code)) for label, code in latest.items())
        return out

    def collect(self, now: float) -> list[Sample]:
        nvml = self.nvml
        out: list[Sample] = []
        read_ecc = self._count % self.ecc_every == 0
        self._count += 1
        for t in self.targets:
            label, h = t.label, t.handle
            gpm_graphics = gpm_sm = None
            gpm = self._gpm.get(label)
            if gpm is not None:
                with contextlib.suppress(nvml.NVMLError):
                    gpm_graphics, gpm_sm = gpm.read()
            util = self._call(label, "nvmlDeviceGetUtilizationRates", h)
            if util is not None:
                out.append(Sample("gpu_util", label, float(util.gpu)))
                out.append(Sample("gpu_mem_bw_util", label, float(util.memory)))
            elif gpm_graphics is not None:
                out.append(Sample("gpu_util", label, gpm_graphics))
            if gpm_sm is not None:
                out.append(Sample("gpu_sm_util", label, gpm_sm))
            mem = self._memory(t)
            if mem is not None and mem.total:
                out.append(Sample("gpu_mem_bytes", label, float(mem.used)))
                out.append(Sample("gpu_mem_total_bytes", label, float(mem.total)))
                out.append(Sample("gpu_mem_util", label, 100.0 * mem.used / mem.total))
            power = self._call(label, "nvmlDeviceGetPowerUsage", h)
            if power is not None:
                out.append(Sample("gpu_power_w", label, power / 1000.0))
            temp = self._temperature(t)
            if temp is not None:
                out.append(Sample("gpu_temp_c", label, float(temp)))
            clock = self._call(label, "nvmlDeviceGetClockInfo", h, getattr(nvml, "NVML_CLOCK_SM", 1))
            if clock is not None:
                out.append(Sample("gpu_sm_clock_mhz", label, float(clock)))
            out.extend(throttle_samples(label, self._call_first(label + "/gpu", THROTTLE_CALLS, t.gpu.handle)))
            if read_ecc:
                volatile = getattr(nvml, "NVML_VOLATILE_ECC", 0)
                for kind, metric in ((0, "gpu_ecc_corrected"), (1, "gpu_ecc_uncorrected")):
                    n = self._call(label, "nvmlDeviceGetTotalEccErrors", h, kind, volatile)
                    if n is not None:
                        out.append(Sample(metric, label, float(n)))
        out.extend(self._xid())
        return out

    def close(self) -> None:
        nvml = self.nvml
        for gpm in self._gpm.values():
            gpm.close()
        self._gpm.clear()
        if self._events is not None:
            with contextlib.suppress(nvml.NVMLError):
                nvml.nvmlEventSetFree(self._events)
            self._events = None
        with contextlib.suppress(nvml.NVMLError):
            nvml.nvmlShutdown()
