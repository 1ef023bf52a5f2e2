"""GPM (GPU performance monitoring, Hopper and later) for the NVIDIA collector.

NVML's utilization is not available on a MIG instance; GPM measures the graphics-engine
activity and the share of busy SMs between two samples, of a whole GPU or of one MIG
instance. ``jobpulse.agent.nvidia`` reports them as ``gpu_util`` (on MIG) and
``gpu_sm_util``. The two sample buffers of each device are allocated once and reused.
"""

from __future__ import annotations

import contextlib
import logging
from typing import Any

from jobpulse.agent.nvidia_devices import Target

log = logging.getLogger("jobpulse.agent")


class Gpm:
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


def gpm_readers(nvml: Any, targets: list[Target]) -> dict[str, Gpm]:
    """A GPM reader for each of ``targets`` (by label) whose GPU supports GPM."""
    readers: dict[str, Gpm] = {}
    supported: dict[int, bool] = {}
    for t in targets:
        if t.gpu.index not in supported:
            try:
                supported[t.gpu.index] = bool(nvml.nvmlGpmQueryDeviceSupport(t.gpu.handle).isSupportedDevice)
            except (nvml.NVMLError, AttributeError):
                supported[t.gpu.index] = False
        if supported[t.gpu.index]:
            try:
                gi = t.mig.gpu_instance if t.mig else None
                readers[t.label] = Gpm(nvml, t.gpu.handle, gi)
            except (nvml.NVMLError, AttributeError) as exc:
                log.debug("GPM unavailable on device %s: %s", t.label, exc)
    return readers
