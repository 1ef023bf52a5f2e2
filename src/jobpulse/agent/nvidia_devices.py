"""The job's NVIDIA devices: NVML's GPUs and MIG instances, and which of them the job uses.

Only the devices the job uses are sampled (``jobpulse.agent.nvidia``), and ``device`` is the
index the job sees (its rank-local CUDA index), not the physical one. ``NVIDIA_VISIBLE_DEVICES``
(set by the container runtime: host indices, ``GPU-``/``MIG-`` UUIDs, ``gpu:mig`` pairs, ``all``,
``none``) narrows NVML's devices when the agent sees more GPUs than the container was given; then
``CUDA_VISIBLE_DEVICES`` (indices into those, ``GPU-``/``MIG-`` UUIDs or unique prefixes of
them, the legacy ``MIG-GPU-<uuid>/<gi>/<ci>``) picks and orders the job's devices, stopping at
the first entry that matches nothing, as CUDA does. Indices follow NVML's PCI bus order, which
is CUDA's order under ``CUDA_DEVICE_ORDER=PCI_BUS_ID`` (and on nodes of identical GPUs).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

log = logging.getLogger("jobpulse.agent")


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


def nvml_uuid(value: Any) -> str:
    """A UUID as NVML returns it (bytes or str), as text."""
    return value.decode() if isinstance(value, bytes) else str(value)


def discover_gpus(nvml: Any) -> list[GpuDevice]:
    """NVML's GPUs, in its (PCI bus) order, each with its MIG devices where MIG is enabled.

    A GPU or MIG device that NVML cannot open is logged and left out.
    """
    out: list[GpuDevice] = []
    for i in range(nvml.nvmlDeviceGetCount()):
        try:
            h = nvml.nvmlDeviceGetHandleByIndex(i)
            gpu = GpuDevice(index=i, uuid=nvml_uuid(nvml.nvmlDeviceGetUUID(h)), handle=h)
        except nvml.NVMLError as exc:
            log.warning("GPU %d cannot be opened: %s", i, exc)
            continue
        try:
            mig_enabled = nvml.nvmlDeviceGetMigMode(h)[0] == getattr(nvml, "NVML_DEVICE_MIG_ENABLE", 1)
        except (nvml.NVMLError, AttributeError):
            mig_enabled = False
        if mig_enabled:
            gpu.migs.extend(_mig_devices(nvml, gpu))
        out.append(gpu)
    return out


def _mig_devices(nvml: Any, gpu: GpuDevice) -> list[MigDevice]:
    """The MIG devices of a GPU in MIG mode, by slot; empty slots skipped."""
    h = gpu.handle
    try:
        slots = nvml.nvmlDeviceGetMaxMigDeviceCount(h)
    except (nvml.NVMLError, AttributeError):
        slots = 0
    migs: list[MigDevice] = []
    for j in range(slots):
        try:
            mh = nvml.nvmlDeviceGetMigDeviceHandleByIndex(h, j)
        except (nvml.NVMLError, AttributeError):
            continue  # an empty slot
        try:
            migs.append(
                MigDevice(
                    index=j,
                    uuid=nvml_uuid(nvml.nvmlDeviceGetUUID(mh)),
                    gpu_instance=nvml.nvmlDeviceGetGpuInstanceId(mh),
                    compute_instance=nvml.nvmlDeviceGetComputeInstanceId(mh),
                    handle=mh,
                )
            )
        except (nvml.NVMLError, AttributeError) as exc:
            log.warning("MIG device %d of GPU %d cannot be opened: %s", j, gpu.index, exc)
    return migs
