"""Locate the cgroup of a process, v1 or v2, under a cgroup root directory.

``/proc/<pid>/cgroup`` names the cgroup path per hierarchy (``0::/path`` for v2,
``4:memory:/path`` for v1). Inside a container the hierarchy is usually mounted with the
container's own cgroup as its root (a cgroup namespace, or a bind mount), so the path does not
exist under the mount: the lookup then drops leading components until a directory exists, ending
at the mount itself.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from jobpulse.agent.base import read_text

# A v1 limit at or above this is "no limit" (the kernel reports PAGE_COUNTER_MAX rounded to pages).
V1_UNLIMITED = 1 << 62


@dataclass(frozen=True)
class Cgroup:
    """Where a process's cgroup files are. ``version`` is 1 or 2.

    For v2 every controller's files are in ``unified``; for v1 ``dirs`` maps a controller
    (``cpu``, ``cpuacct``, ``memory``, ``blkio``, ``cpuset``) to its directory.
    """

    version: int
    unified: Path | None = None
    dirs: dict[str, Path] = field(default_factory=dict)

    def dir(self, controller: str) -> Path | None:
        if self.version == 2:
            return self.unified
        return self.dirs.get(controller)

    def has_limits(self) -> bool:
        """True when a CPU quota or a memory limit is set on this cgroup."""
        if self.version == 2:
            assert self.unified is not None
            cpu_max = read_text(self.unified / "cpu.max") or ""
            mem_max = read_text(self.unified / "memory.max") or ""
            return (bool(cpu_max) and not cpu_max.startswith("max")) or (
                bool(mem_max) and not mem_max.startswith("max")
            )
        cpu = self.dirs.get("cpu")
        if cpu is not None:
            quota = (read_text(cpu / "cpu.cfs_quota_us") or "-1").strip()
            if quota not in ("", "-1"):
                return True
        mem = self.dirs.get("memory")
        if mem is not None:
            try:
                limit = int((read_text(mem / "memory.limit_in_bytes") or "").strip() or V1_UNLIMITED)
            except ValueError:
                limit = V1_UNLIMITED
            if limit < V1_UNLIMITED:
                return True
        return False


def _resolve(mount: Path, path: str) -> Path | None:
    parts = [p for p in path.split("/") if p]
    for i in range(len(parts) + 1):
        candidate = mount.joinpath(*parts[i:])
        if candidate.is_dir():
            return candidate
    return None


def _v1_mount(cgroup_root: Path, controllers: list[str]) -> Path | None:
    for name in (",".join(controllers), ",".join(sorted(controllers))):
        candidate = cgroup_root / name
        if candidate.is_dir():
            return candidate
    return None


def find_cgroup(
    proc_root: str | os.PathLike[str] = "/proc",
    cgroup_root: str | os.PathLike[str] = "/sys/fs/cgroup",
    pid: int | str = "self",
    path: str | None = None,
) -> Cgroup | None:
    """The cgroup of ``pid`` (or the cgroup ``path`` given explicitly), or None if none is found.

    A pure v2 system (``cgroup.controllers`` at the root) gives version 2; a v1 or hybrid system
    gives version 1 with one directory per mounted v1 controller.
    """
    root = Path(cgroup_root)
    lines: list[tuple[str, str]] = []
    if path is None:
        text = read_text(Path(proc_root) / str(pid) / "cgroup")
        if text is None:
            return None
        for line in text.splitlines():
            parts = line.split(":", 2)
            if len(parts) == 3:
                lines.append((parts[1], parts[2]))
    if (root / "cgroup.controllers").is_file():
        cg_path = path if path is not None else next((p for c, p in lines if c == ""), None)
        if cg_path is None:
            return None
        unified = _resolve(root, cg_path)
        return Cgroup(version=2, unified=unified) if unified is not None else None
    dirs: dict[str, Path] = {}
    if path is not None:
        lines = [(c, path) for c in ("cpu,cpuacct", "cpuset", "memory", "blkio")]
    for controllers, cg_path in lines:
        names = [c for c in controllers.split(",") if c and not c.startswith("name=")]
        if not names:
            continue
        mount = _v1_mount(root, names)
        if mount is None:
            # cpu and cpuacct may be mounted together or apart; try each alone.
            for name in names:
                single = _v1_mount(root, [name])
                if single is not None:
                    resolved = _resolve(single, cg_path)
                    if resolved is not None:
                        dirs[name] = resolved
            continue
        resolved = _resolve(mount, cg_path)
        if resolved is not None:
            for name in names:
                dirs[name] = resolved
    if not dirs:
        return None
    return Cgroup(version=1, dirs=dirs)


def in_container(root: str | os.PathLike[str] = "/") -> bool:
    """Whether this process looks like it runs in a container (Docker, Podman, Kubernetes, nspawn)."""
    base = Path(root)
    if (base / ".dockerenv").exists() or (base / "run/.containerenv").exists():
        return True
    env = os.environ
    return bool(env.get("KUBERNETES_SERVICE_HOST") or env.get("container"))  # noqa: SIM112 (systemd's name)
