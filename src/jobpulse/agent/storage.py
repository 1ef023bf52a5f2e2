"""Usage of configured paths: ``<name>_bytes`` and ``<name>_util`` (a fraction, 0..1).

Configured as ``name=path`` or ``name=path:limit`` (``--paths ephemeral=/tmp,cache=/cache:50G``);
DESIGN.md names two: ``ephemeral`` (the worker's scratch space) and ``cache`` (a read-write cache
directory), giving ``ephemeral_bytes``, ``ephemeral_util``, ``cache_bytes``, ``cache_util``.

- Without a limit the path's file system is measured with ``statvfs``: bytes used on it, and
  used / (used + available to unprivileged users), the figure ``df`` prints.
- With a limit (a quota that the file system does not enforce, e.g. a directory on a shared
  disk) the directory's own size is summed like ``du`` (allocated blocks, hard links once, not
  crossing into other file systems) and divided by the limit. Walking a large tree is not cheap,
  so it runs in a background thread at most every ``du_every`` seconds (and never more than 1%
  of the time) and the last finished result is reported in between.
"""

from __future__ import annotations

import os
import re
import threading
import time
from dataclasses import dataclass

from jobpulse.agent.base import Sample

_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgtpe]?)(i?b?)\s*$", re.IGNORECASE)
_NAME = re.compile(r"^[a-z][a-z0-9_]{0,40}$")


def parse_size(text: str) -> int:
    """Bytes in ``512``, ``64K``, ``50G``, ``1.5TiB`` (K, M, G, T, P, E are powers of 1024)."""
    m = _SIZE.match(text)
    if not m:
        raise ValueError(f"not a size: {text!r}")
    power = "kmgtpe".find(m.group(2).lower()) + 1 if m.group(2) else 0
    return int(float(m.group(1)) * 1024**power)


@dataclass(frozen=True)
class PathSpec:
    name: str
    path: str
    limit: int | None = None


def parse_paths(spec: str) -> list[PathSpec]:
    """Parse ``ephemeral=/tmp,cache=/cache:50G`` into path specs."""
    out: list[PathSpec] = []
    for item in spec.split(","):
        item = item.strip()
        if not item:
            continue
        name, sep, rest = item.partition("=")
        name = name.strip()
        if not sep or not _NAME.match(name) or not rest:
            raise ValueError(f"expected NAME=PATH[:LIMIT], got {item!r}")
        path, limit = rest, None
        head, colon, tail = rest.rpartition(":")
        if colon and head and _SIZE.match(tail):
            path, limit = head, parse_size(tail)
        out.append(PathSpec(name=name, path=path, limit=limit))
    return out


def du_bytes(path: str) -> int:
    """Allocated bytes under ``path``: hard links counted once, other file systems not entered."""
    try:
        top = os.lstat(path)
    except OSError:
        return 0
    seen: set[tuple[int, int]] = set()
    total = top.st_blocks * 512
    stack = [path] if os.path.isdir(path) else []
    while stack:
        current = stack.pop()
        try:
            it = os.scandir(current)
        except OSError:
            continue
        with it:
            for entry in it:
                try:
                    st = entry.stat(follow_symlinks=False)
                except OSError:
                    continue
                if st.st_dev != top.st_dev:
                    continue
                if st.st_nlink > 1:
                    key = (st.st_dev, st.st_ino)
                    if key in seen:
                        continue
                    seen.add(key)
                total += st.st_blocks * 512
                if entry.is_dir(follow_symlinks=False):
                    stack.append(entry.path)
    return total


class _DirUsage:
    def __init__(self, spec: PathSpec, du_every: float, background: bool) -> None:
        self.spec = spec
        self.du_every = du_every
        self.background = background
        self.value: int | None = None
        self._next = 0.0
        self._thread: threading.Thread | None = None

    def _run(self) -> None:
        started = time.monotonic()
        if os.path.exists(self.spec.path):
            self.value = du_bytes(self.spec.path)
        took = time.monotonic() - started
        self._next = started + max(self.du_every, 100 * took)

    def current(self, now_wall: float) -> int | None:
        if time.monotonic() >= self._next and (self._thread is None or not self._thread.is_alive()):
            if self.background:
                self._thread = threading.Thread(target=self._run, name="jobpulse-du", daemon=True)
                self._thread.start()
            else:
                self._run()
        return self.value


class StorageCollector:
    def __init__(self, specs: list[PathSpec], *, du_every: float = 60.0, background: bool = True) -> None:
        self.specs = specs
        self._dirs = {s.name: _DirUsage(s, du_every, background) for s in specs if s.limit}

    def collect(self, now: float) -> list[Sample]:
        out: list[Sample] = []
        for spec in self.specs:
            if spec.limit:
                used = self._dirs[spec.name].current(now)
                if used is not None:
                    out.append(Sample(f"{spec.name}_bytes", "", float(used)))
                    out.append(Sample(f"{spec.name}_util", "", used / spec.limit))
                continue
            try:
                st = os.statvfs(spec.path)
            except OSError:
                continue
            used = (st.f_blocks - st.f_bfree) * st.f_frsize
            usable = used + st.f_bavail * st.f_frsize
            out.append(Sample(f"{spec.name}_bytes", "", float(used)))
            if usable > 0:
                out.append(Sample(f"{spec.name}_util", "", used / usable))
        return out
