"""The node agent: system metrics of one worker, sampled and sent as ``system`` events.

``jobpulse agent --job J --worker W`` samples a container (its cgroup), a process tree
(``--pid``) or the host; ``jobpulse run -- cmd`` runs a command as a worker and samples its
process tree (see ``wrap``). Collectors, one per module, each read one source and return
``Sample(metric, device, value)``; ``device`` is the accelerator index the job sees, ``""`` for
worker-level series. Rates come from counter deltas, so the first sample of a rate is absent.

Metric names and units:

====================== ========= =====================================================
metric                 unit      meaning
====================== ========= =====================================================
cpu_cores              cores     CPU in use (cgroup, process tree or host)
cpu_util               %         ``cpu_cores`` of ``cpu_limit_cores``
cpu_limit_cores        cores     CPU quota, else cpuset size, else CPUs
mem_bytes              bytes     memory in use without the reclaimable page cache
mem_util               %         ``mem_bytes`` of ``mem_limit_bytes``
mem_limit_bytes        bytes     memory limit, else the machine's memory
mem_page_cache_bytes   bytes     kernel page cache of the worker (file pages, not shmem)
net_rx_Bps             B/s       received over all interfaces but loopback
net_tx_Bps             B/s       sent over all interfaces but loopback
disk_read_Bps          B/s       block-device reads
disk_write_Bps         B/s       block-device writes
<name>_bytes           bytes     space used on a configured path (``ephemeral``, ``cache``)
<name>_util            fraction  of the path's file system, or of its configured limit
gpu_util               %         NVML utilization (GPM engine activity on MIG)
gpu_sm_util            %         SMs busy (GPM)
gpu_mem_bw_util        %         time device memory was read or written
gpu_mem_bytes          bytes     device memory in use
gpu_mem_total_bytes    bytes     device memory size
gpu_mem_util           %         ``gpu_mem_bytes`` of ``gpu_mem_total_bytes``
gpu_power_w            W         board power
gpu_temp_c             °C        GPU temperature
gpu_sm_clock_mhz       MHz       SM clock
gpu_ecc_corrected      count     volatile corrected ECC errors
gpu_ecc_uncorrected    count     volatile uncorrected ECC errors
gpu_xid_errors         count     XID events since the agent started
gpu_xid                code      XID number of the latest event, once per event
gpu_throttle_thermal   0 or 1    clocks slowed for temperature (``nvidia_throttle``)
gpu_throttle_power     0 or 1    clocks slowed by the hardware power brake
gpu_power_capped       0 or 1    clocks held at the power limit (normal under full load)
npu_util               %         AI Core utilization
npu_mem_bytes          bytes     HBM in use (DDR on chips without HBM)
npu_mem_total_bytes    bytes     HBM size (DDR on chips without HBM)
npu_mem_util           %         ``npu_mem_bytes`` of ``npu_mem_total_bytes``
npu_power_w            W         NPU power
npu_temp_c             °C        NPU temperature
agent_cpu_seconds      s         the agent's own CPU time so far
agent_cpu_util         %         the agent's share of one core since the last sample
agent_rss_bytes        bytes     the agent's resident memory
====================== ========= =====================================================

Page cache and ``cache_bytes`` are different things: ``mem_page_cache_bytes`` is the kernel's
file cache charged to the worker's memory, while DESIGN's ``cache_bytes``/``cache_util`` are the
bytes used on the configured cache *path* (``--paths cache=/cache``).
"""

from jobpulse.agent.base import Sample

__all__ = ["Sample"]
