"""NVIDIA GPUs through NVML (the ``pynvml`` module of the ``nvidia-ml-py`` package).

Only the devices the job uses are sampled, and ``device`` is the index the job sees (its
rank-local CUDA index), not the physical one. ``NVIDIA_VISIBLE_DEVICES`` (set by the container
runtime: host indices, ``GPU-``/``MIG-`` UUIDs, ``gpu:mig`` pairs, ``all``, ``none``) narrows
NVML's devices when the agent sees more GPUs than the container was given; then
``CUDA_VISIBLE_DEVICES`` (indices into those, ``GPU-``/``MIG-`` UUIDs or unique prefixes of
them, the legacy ``MIG-GPU-<uuid>/<gi>/<ci>``) picks and orders the job's devices, stopping at
the first entry that matches nothing, as CUDA does. Indices follow NVML's PCI bus order, which
is CUDA's order under ``CUDA_DEVICE_ORDER=PCI_BUS_ID`` (and on nodes of identical GPUs).

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
from dataclasses import dataclass, field
from typing import Any

from jobpulse.agent.base import Sample
from jobpulse.agent.nvidia_throttle import throttle_samples

log = logging.getLogger("jobpulse.agent")

XID_EVENT = 0x8  # nvmlEventTypeXidCriticalError
ALL_INSTANCES = 0xFFFFFFFF


@dataclass
class MigDevice:
    index: int  # MIG device index within its GPU
    uuid: str
    gpu_instance: int
    compute_instance: int
    handle: Any = None


@dataclass
class GpuDevice:
    index: int  # NVML index
    uuid: str
    handle: Any = None
    migs: list[MigDevice] = field(default_factory=list)


@dataclass
class Target:
    """One device of the job: a whole GPU, or a MIG instance (``mig`` set) of ``gpu``."""

    label: str
    gpu: GpuDevice
    mig: MigDevice | None = None

    @property
    def uuid(self) -> str:
        return self.mig.uuid if self.mig else self.gpu.uuid

    @property
    def handle(self) -> Any:
        return self.mig.handle if self.mig else self.gpu.handle


Entry = tuple[GpuDevice, MigDevice | None]


def _split(spec: str) -> list[str]:
    return [t.strip() for t in spec.split(",") if t.strip()]


def _match_uuid(token: str, candidates: list[tuple[str, Entry]]) -> Entry | None:
    exact = [e for u, e in candidates if u == token]
    if exact:
        return exact[0]
    prefixed = [e for u, e in candidates if u.startswith(token)]
    return prefixed[0] if len(prefixed) == 1 else None


def _mig_entries(base: list[Entry]) -> list[Entry]:
    out: list[Entry] = []
    for gpu, mig in base:
        if mig is not None:
            out.append((gpu, mig))
        else:
            out.extend((gpu, m) for m in gpu.migs)
    return out


def _resolve_token(token: str, base: list[Entry]) -> Entry | None:
    if token.lstrip("-").isdigit():
        i = int(token)
        return base[i] if 0 <= i < len(base) else None
    if token.startswith("MIG-GPU-"):
        # legacy form MIG-GPU-<gpu uuid>/<gpu instance>/<compute instance>
        parts = token[len("MIG-") :].split("/")
        if len(parts) != 3 or not parts[1].isdigit() or not parts[2].isdigit():
            return None
        for gpu, mig in _mig_entries(base):
            if (
                mig is not None
                and gpu.uuid == parts[0]
                and mig.gpu_instance == int(parts[1])
                and mig.compute_instance == int(parts[2])
            ):
                return gpu, mig
        return None
    if token.startswith("MIG-"):
        return _match_uuid(token, [(m.uuid, (g, m)) for g, m in _mig_entries(base) if m is not None])
    if token.startswith("GPU-"):
        return _match_uuid(token, [(g.uuid, (g, None)) for g, m in base if m is None])
    return None


def select_devices(
    gpus: list[GpuDevice], cuda_visible: str | None = None, nvidia_visible: str | None = None
) -> list[Target]:
    """The job's devices among NVML's ``gpus``, labelled by the index the job sees."""
    base: list[Entry] = [(g, None) for g in gpus]
    if nvidia_visible is not None:
        spec = nvidia_visible.strip().lower()
        if spec in ("none", "void", ""):
            base = []
        elif spec != "all":
            tokens = _split(nvidia_visible)
            if not (all(t.isdigit() for t in tokens) and len(tokens) == len(gpus)):
                picked: list[Entry] = []
                for token in tokens:
                    if ":" in token and all(p.isdigit() for p in token.split(":", 1)):
                        gi, mi = (int(p) for p in token.split(":", 1))
                        gpu = next((g for g in gpus if g.index == gi), None)
                        mig = next((m for m in gpu.migs if m.index == mi), None) if gpu else None
                        entry: Entry | None = (gpu, mig) if gpu and mig else None
                    elif token.isdigit():
                        gpu = next((g for g in gpus if g.index == int(token)), None)
                        entry = (gpu, None) if gpu else None
                    else:
                        entry = _resolve_token(token, base)
                    if entry is not None and entry not in picked:
                        picked.append(entry)
                # Nothing recognizable: the runtime already restricted what NVML shows.
                base = picked or base
    chosen: list[Entry] = base
    if cuda_visible is not None:
        chosen = []
        for token in cuda_visible.split(","):
            token = token.strip()
            entry = _resolve_token(token, base) if token else None
            if entry is None:
                break  # CUDA ignores this entry and every one after it
            if entry not in chosen:
                chosen.append(entry)
    if cuda_visible is None and nvidia_visible is None:
        return [Target(label=str(g.index), gpu=g) for g, _ in chosen]
    return [Target(label=str(i), gpu=g, mig=m) for i, (g, m) in enumerate(chosen)]


class _Gpm:
    """GPM (GPU performance monitoring) metrics between consecutive samples of one GPU or MIG instance."""

    def __init__(self, nvml: Any, gpu_handle: Any, gpu_instance: int | None) -> None:
        self.nvml = nvml
        self.gpu_handle = gpu_handle
        self.gpu_instance = gpu_instance
        self.samples = [nvml.nvmlGpmSampleAlloc(), nvml.nvmlGpmSampleAlloc()]
        self.request = nvml.c_nvmlGpmMetricsGet_t()
        self.request.version = getattr(nvml, "NVML_GPM_METRICS_GET_VERSION", 1)
        self.request.numMetrics = 2
        self.request.metrics[0].metricId = getattr(nvml, "NVML_GPM_METRIC_GRAPHICS_UTIL", 1)
        self.request.metrics[1].metricId = getattr(nvml, "NVML_GPM_METRIC_SM_UTIL", 2)
        self.have_prev = False

    def read(self) -> tuple[float | None, float | None]:
        """(graphics activity %, SM utilization %) since the previous call; Nones on the first."""
        cur = self.samples[1] if self.have_prev else self.samples[0]
        if self.gpu_instance is None:
            self.nvml.nvmlGpmSampleGet(self.gpu_handle, cur)
        else:
            self.nvml.nvmlGpmMigSampleGet(self.gpu_handle, self.gpu_instance, cur)
        if not self.have_prev:
            self.have_prev = True
            return None, None
        self.request.sample1 = self.samples[0]
        self.request.sample2 = cur
        self.nvml.nvmlGpmMetricsGet(self.request)
        self.samples.reverse()  # the newest sample becomes the previous one
        values: list[float | None] = []
        for i in range(2):
            m = self.request.metrics[i]
            values.append(float(m.value) if m.nvmlReturn == 0 else None)
        return values[0], values[1]

    def close(self) -> None:
        for s in self.samples:
            with contextlib.suppress(self.nvml.NVMLError):
                self.nvml.nvmlGpmSampleFree(s)


def _uuid(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


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
        self.devices = self._enumerate()
        cuda = gpus if gpus is not None else env.get("CUDA_VISIBLE_DEVICES")
        self.targets = select_devices(self.devices, cuda, env.get("NVIDIA_VISIBLE_DEVICES"))
        self._gpm: dict[str, _Gpm] = {}
        if use_gpm:
            self._setup_gpm()
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

    def _enumerate(self) -> list[GpuDevice]:
        nvml = self.nvml
        out: list[GpuDevice] = []
        for i in range(nvml.nvmlDeviceGetCount()):
            try:
                h = nvml.nvmlDeviceGetHandleByIndex(i)
                gpu = GpuDevice(index=i, uuid=_uuid(nvml.nvmlDeviceGetUUID(h)), handle=h)
            except nvml.NVMLError as exc:
                log.warning("GPU %d cannot be opened: %s", i, exc)
                continue
            try:
                mig_enabled = nvml.nvmlDeviceGetMigMode(h)[0] == getattr(nvml, "NVML_DEVICE_MIG_ENABLE", 1)
            except (nvml.NVMLError, AttributeError):
                mig_enabled = False
            if mig_enabled:
                try:
                    slots = nvml.nvmlDeviceGetMaxMigDeviceCount(h)
                except (nvml.NVMLError, AttributeError):
                    slots = 0
                for j in range(slots):
                    try:
                        mh = nvml.nvmlDeviceGetMigDeviceHandleByIndex(h, j)
                    except (nvml.NVMLError, AttributeError):
                        continue  # an empty slot
                    try:
                        gpu.migs.append(
                            MigDevice(
                                index=j,
                                uuid=_uuid(nvml.nvmlDeviceGetUUID(mh)),
                                gpu_instance=nvml.nvmlDeviceGetGpuInstanceId(mh),
                                compute_instance=nvml.nvmlDeviceGetComputeInstanceId(mh),
                                handle=mh,
                            )
                        )
                    except (nvml.NVMLError, AttributeError) as exc:
                        log.warning("MIG device %d of GPU %d cannot be opened: %s", j, i, exc)
            out.append(gpu)
        return out

    def _setup_gpm(self) -> None:
        nvml = self.nvml
        supported: dict[int, bool] = {}
        for t in self.targets:
            if t.gpu.index not in supported:
                try:
                    supported[t.gpu.index] = bool(nvml.nvmlGpmQueryDeviceSupport(t.gpu.handle).isSupportedDevice)
                except (nvml.NVMLError, AttributeError):
                    supported[t.gpu.index] = False
            if supported[t.gpu.index]:
                try:
                    gi = t.mig.gpu_instance if t.mig else None
                    self._gpm[t.label] = _Gpm(nvml, t.gpu.handle, gi)
                except (nvml.NVMLError, AttributeError) as exc:
                    log.debug("GPM unavailable on device %s: %s", t.label, exc)

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

    def _temperature(self, t: Target) -> Any:
        sensor = getattr(self.nvml, "NVML_TEMPERATURE_GPU", 0)
        name = "nvmlDeviceGetTemperature"
        if (t.label, name) not in self._unsupported:
            value = self._call(t.label, name, t.handle, sensor)
            if (t.label, name) not in self._unsupported:
                return value
        # Drivers that dropped the old entry point have the versioned one.
        return self._call(t.label, "nvmlDeviceGetTemperatureV", t.handle, sensor)

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
                uuid = _uuid(nvml.nvmlDeviceGetUUID(data.device))
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
            out.extend(throttle_samples(self._call, self._unsupported, label, t.gpu.handle))
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
