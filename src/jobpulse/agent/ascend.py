"""Huawei Ascend NPUs through ``npu-smi``.

Every sample runs ``npu-smi info`` once (never more than one command per sample) and parses its
table: one row per NPU (``NPU Name | Health | Power(W) Temp(C) ...``) followed by one row per chip
(``Chip | Bus-Id | AICore(%) Memory-Usage(MB) HBM-Usage(MB)``). Columns are found by their
header names, so tables with and without HBM (910 vs 310P) or with extra columns parse alike.

Only the job's chips are reported. ``ASCEND_VISIBLE_DEVICES`` (set by the Ascend container
runtime: physical NPU ids such as ``0,1`` or ``0-3``) narrows the chips the agent sees;
``ASCEND_RT_VISIBLE_DEVICES`` (the runtime's logical ids, like ``CUDA_VISIBLE_DEVICES``) then picks
and orders them. ``device`` is the index the job sees.

Metrics per chip:

======================= ======= =================================================
``npu_util``            %       AI Core utilization
``npu_mem_util``        %       HBM in use (DDR on chips without HBM) of its size
``npu_mem_bytes``       bytes   HBM in use (DDR on chips without HBM)
``npu_mem_total_bytes`` bytes   HBM size (DDR on chips without HBM)
``npu_power_w``         W       power draw of the NPU (reported on its first chip)
``npu_temp_c``          °C      NPU temperature (reported on its first chip)
======================= ======= =================================================

``parse_npu_usages`` reads the per-NPU detail of ``npu-smi info -t usages -i N`` (AI CPU,
control CPU, HBM and DDR bandwidth shares) for callers that want it on demand; it is not run
per sample.
"""

from __future__ import annotations

import logging
import os
import re
import subprocess
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from jobpulse.agent.base import Sample

log = logging.getLogger("jobpulse.agent")

Runner = Callable[[Sequence[str]], str]
MIB = 1 << 20
_PAIR = re.compile(r"(\S+)\s*/\s*(\S+)")
_TOKEN = re.compile(r"\S+\s*/\s*\S+|\S+")


def run_command(argv: Sequence[str], timeout: float = 10.0) -> str:
    """Run a command and return its standard output; raises on failure."""
    done = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout, check=True)
    return done.stdout


@dataclass
class NpuChip:
    npu: int
    chip: int
    name: str = ""
    health: str = ""
    bus_id: str = ""
    logic_id: int | None = None
    power_w: float | None = None
    temp_c: float | None = None
    aicore_pct: float | None = None
    hbm_used_mb: float | None = None
    hbm_total_mb: float | None = None
    mem_used_mb: float | None = None
    mem_total_mb: float | None = None


def _num(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None  # "NA", "-"


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def _columns(cell: str, header: list[str]) -> dict[str, str]:
    return dict(zip(header, _TOKEN.findall(cell), strict=False))


def parse_npu_info(text: str) -> list[NpuChip]:
    """The chips listed by ``npu-smi info``, in table order.

    After each ``+---``/``+===`` rule comes an NPU row (``id name | health | power temp ...``),
    then that NPU's chip rows (``chip [logic id] | bus id | aicore memory hbm``) up to the next rule.
    """
    chips: list[NpuChip] = []
    npu_header: list[str] = []
    chip_header: list[str] = []
    current: dict[str, str] | None = None  # the NPU row whose chip rows follow
    in_devices = False
    after_rule = False
    for line in text.splitlines():
        if line.startswith("+"):
            after_rule, current = True, None
            continue
        if not line.startswith("|"):
            continue
        cells = _cells(line)
        if len(cells) < 3:
            continue
        first = cells[0].split()
        if first[:2] == ["NPU", "Name"]:
            npu_header, in_devices = cells[2].split(), False
            continue
        if first[:1] == ["Chip"] and npu_header:
            chip_header, in_devices = cells[2].split(), True
            continue
        if cells[1].startswith("Process"):
            in_devices = False  # the process table that ends the output
            continue
        if not in_devices or not first or not first[0].isdigit():
            continue
        if after_rule:
            after_rule = False
            if len(first) >= 2:
                current = {"npu": first[0], "name": first[1], "health": cells[1]}
                current.update(_columns(cells[2], npu_header))
            continue
        if current is None:
            continue
        third = _columns(cells[2], chip_header)
        chip = NpuChip(
            npu=int(current["npu"]),
            chip=int(first[0]),
            name=current["name"],
            health=current["health"],
            bus_id=cells[1],
            logic_id=int(first[1]) if len(first) > 1 and first[1].isdigit() else None,
        )
        if not any(c.npu == chip.npu for c in chips):
            chip.power_w = _num(current.get("Power(W)", ""))
            chip.temp_c = _num(current.get("Temp(C)", ""))
        chip.aicore_pct = _num(third.get("AICore(%)", ""))
        for key, used_attr, total_attr in (
            ("HBM-Usage(MB)", "hbm_used_mb", "hbm_total_mb"),
            ("Memory-Usage(MB)", "mem_used_mb", "mem_total_mb"),
        ):
            m = _PAIR.fullmatch(third.get(key, ""))
            if m:
                setattr(chip, used_attr, _num(m.group(1)))
                setattr(chip, total_attr, _num(m.group(2)))
        chips.append(chip)
    return chips


def parse_npu_usages(text: str) -> dict[str, float]:
    """The ``key : number`` lines of ``npu-smi info -t usages -i N``.

    For example ``{"Aicore Usage Rate(%)": 12.0, "HBM Capacity(MB)": 65536.0, ...}``.
    """
    out: dict[str, float] = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if not sep:
            continue
        number = _num(value.strip())
        if number is not None:
            out[key.strip()] = number
    return out


def usages_samples(usages: Mapping[str, float], device: str) -> list[Sample]:
    """Samples from a parsed ``-t usages`` answer: utilizations, AI CPU, control CPU, bandwidths."""
    names = {
        "Aicore Usage Rate(%)": "npu_util",
        "Aicpu Usage Rate(%)": "npu_aicpu_util",
        "Ctrlcpu Usage Rate(%)": "npu_ctrlcpu_util",
        "Aivector Usage Rate(%)": "npu_vector_util",
        "HBM Bandwidth Usage Rate(%)": "npu_hbm_bw_util",
        "DDR Bandwidth Usage Rate(%)": "npu_ddr_bw_util",
    }
    out = [Sample(metric, device, usages[key]) for key, metric in names.items() if key in usages]
    if usages.get("HBM Capacity(MB)"):
        if "HBM Usage Rate(%)" in usages:
            out.append(Sample("npu_mem_util", device, usages["HBM Usage Rate(%)"]))
    elif "Memory Usage Rate(%)" in usages:
        out.append(Sample("npu_mem_util", device, usages["Memory Usage Rate(%)"]))
    return out


def _id_list(spec: str) -> list[int] | None:
    ids: list[int] = []
    for part in spec.split(","):
        part = part.strip()
        if not part:
            continue
        lo, sep, hi = part.partition("-")
        if not lo.isdigit() or (sep and not hi.isdigit()):
            return None
        ids.extend(range(int(lo), int(hi) + 1) if sep else [int(lo)])
    return ids


def select_chips(chips: list[NpuChip], env: Mapping[str, str]) -> list[tuple[str, NpuChip]]:
    """The job's chips with the index the job sees."""
    candidates = sorted(chips, key=lambda c: (c.npu, c.chip))
    physical = env.get("ASCEND_VISIBLE_DEVICES")
    if physical and physical.strip().lower() != "all":
        ids = _id_list(physical)
        if ids is not None:
            narrowed = [c for c in candidates if c.npu in ids]
            # Inside the container npu-smi may already show only the given NPUs, renumbered.
            candidates = narrowed or candidates
    logical = env.get("ASCEND_RT_VISIBLE_DEVICES")
    if logical is not None:
        ids = _id_list(logical)
        if ids is not None:
            picked = []
            for i in ids:
                if not 0 <= i < len(candidates):
                    break
                picked.append(candidates[i])
            return [(str(i), c) for i, c in enumerate(picked)]
    return [(str(i), c) for i, c in enumerate(candidates)]


def chip_samples(device: str, chip: NpuChip) -> list[Sample]:
    out: list[Sample] = []
    if chip.aicore_pct is not None:
        out.append(Sample("npu_util", device, chip.aicore_pct))
    if chip.hbm_total_mb:
        used, total = chip.hbm_used_mb, chip.hbm_total_mb
    else:
        used, total = chip.mem_used_mb, chip.mem_total_mb
    if used is not None and total:
        out.append(Sample("npu_mem_bytes", device, used * MIB))
        out.append(Sample("npu_mem_total_bytes", device, total * MIB))
        out.append(Sample("npu_mem_util", device, 100.0 * used / total))
    if chip.power_w is not None:
        out.append(Sample("npu_power_w", device, chip.power_w))
    if chip.temp_c is not None:
        out.append(Sample("npu_temp_c", device, chip.temp_c))
    return out


class AscendCollector:
    """Samples the job's Ascend chips with one ``npu-smi info`` per sample."""

    def __init__(self, runner: Runner = run_command, env: Mapping[str, str] | None = None) -> None:
        self.runner = runner
        self.env = os.environ if env is None else env
        self._warned = False
        self._last: list[tuple[str, NpuChip]] | None = None  # the chips of the latest sample

    def _chips(self) -> list[tuple[str, NpuChip]]:
        try:
            text = self.runner(["npu-smi", "info"])
        except (OSError, subprocess.SubprocessError) as exc:
            if not self._warned:
                log.warning("npu-smi info failed: %s", exc)
                self._warned = True
            return []
        return select_chips(parse_npu_info(text), self.env)

    def collect(self, now: float) -> list[Sample]:
        out: list[Sample] = []
        self._last = self._chips()
        for device, chip in self._last:
            out.extend(chip_samples(device, chip))
        return out

    def device_names(self) -> list[str]:
        """The model of each of the job's chips, as ``Ascend <name>`` (``npu-smi`` names it ``910B3``, ...), from
        the latest sample's table (no command of its own once the collector has sampled)."""
        chips = self._last if self._last is not None else self._chips()
        return [f"Ascend {chip.name}" if chip.name else "Ascend NPU" for _, chip in chips]
