"""Why an NVIDIA GPU's clocks are held down, from NVML's current clock event reasons (called throttle reasons
before driver 535: ``nvmlDeviceGetCurrentClocksEventReasons``, else ``nvmlDeviceGetCurrentClocksThrottleReasons``).

Metrics per device (the job's index), read by the hardware detector of insights:

=========================== ======== ================================================
``gpu_throttle_thermal``    0 or 1   1 while the clocks are slowed for temperature:
                                     software thermal slowdown or hardware thermal
                                     slowdown
``gpu_throttle_power``      0 or 1   1 while the hardware power brake slows the
                                     clocks (an external signal: a power supply or
                                     the system's power management)
``gpu_power_capped``        0 or 1   1 while the clocks are held at the power limit
                                     (the software power cap)
=========================== ======== ================================================

The software power cap is not throttling in the sense of a fault: a GPU under a full load is meant to run at
its power limit. On an H100 80GB HBM3 training a bf16 MLP, the cap held the clocks for whole minutes at 690–700 W
(the card's limit is 700 W) while utilization was 98–100 %; counted as throttling, every healthy job at full load
would carry a hardware finding. So it is a metric of its own, shown on the System tab, and the hardware detector
reads only ``gpu_throttle_thermal`` and ``gpu_throttle_power``.

The reasons are the whole GPU's: a MIG instance reports those of its GPU. The other reasons (idle, application
clocks, hardware slowdown without a cause, sync boost, display clock) are not sent.
"""

from __future__ import annotations

from typing import Any

from jobpulse.agent.base import Sample

# The bits of nvmlClocksEventReasons (the same values as the older nvmlClocksThrottleReason* constants).
SW_POWER_CAP = 0x4
SW_THERMAL_SLOWDOWN = 0x20
HW_THERMAL_SLOWDOWN = 0x40
HW_POWER_BRAKE_SLOWDOWN = 0x80

THERMAL = SW_THERMAL_SLOWDOWN | HW_THERMAL_SLOWDOWN

# The current name of the call first; a pynvml or a driver without it has the older one.
CALLS = ("nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetCurrentClocksThrottleReasons")


def throttle_samples(label: str, reasons: Any) -> list[Sample]:
    """``gpu_throttle_thermal``, ``gpu_throttle_power`` and ``gpu_power_capped`` of the device ``label`` from its
    GPU's clock event reasons (the answer of the first of ``CALLS`` NVML has), or nothing where there were none."""
    if reasons is None:
        return []
    mask = int(reasons)
    return [
        Sample("gpu_throttle_thermal", label, 1.0 if mask & THERMAL else 0.0),
        Sample("gpu_throttle_power", label, 1.0 if mask & HW_POWER_BRAKE_SLOWDOWN else 0.0),
        Sample("gpu_power_capped", label, 1.0 if mask & SW_POWER_CAP else 0.0),
    ]
