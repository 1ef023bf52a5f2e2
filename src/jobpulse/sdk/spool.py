"""A bounded local directory of requests that could not be sent yet.

Layout: ``<root>/<job>/<worker>/<time_ns>-<pid>-<counter>.jpr``, one file per HTTP
request, written to a temporary name and renamed, so a reader never sees half a file.
Names sort in the order the requests were made, and are replayed in that order.

Locks (``flock``, advisory, released by the kernel when a process dies):

- ``<dir>/.owner`` is held by the live process that writes the directory. A process
  scanning for left-over spools skips directories whose owner is alive: their owner
  replays them itself.
- each spool file is locked while it is being replayed, and its link count is checked
  after locking, so a file that another process replayed and removed in the meantime
  is not sent twice.

The directory is bounded in bytes: when a new file would exceed the bound, the oldest
files are removed and the count of dropped requests and events is reported.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import re
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import orjson

from jobpulse.sdk.wire import Request

try:
    import fcntl
except ImportError:  # pragma: no cover - not POSIX: no locking
    fcntl = None  # type: ignore[assignment]

MAGIC = b"JPSPOOL1\n"
SUFFIX = ".jpr"
_SAFE = re.compile(r"[^A-Za-z0-9_.-]")
_counter = itertools.count()


def default_root() -> Path:
    if os.environ.get("JOBPULSE_SPOOL_DIR"):
        return Path(os.environ["JOBPULSE_SPOOL_DIR"])
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "jobpulse" / "spool"


def dir_name(value: str) -> str:
    """A file-system safe, reversible-enough name for a job or worker id."""
    name = _SAFE.sub(lambda m: f"%{ord(m.group()):02X}", value)
    return name if name not in ("", ".", "..") else f"%{name or 'empty'}"


def _lock(fd: int) -> bool:
    if fcntl is None:
        return True
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return False
    return True


@dataclass
class Entry:
    """A spooled request taken (locked) for replay."""

    path: Path
    fd: int
    request: Request
    url: str
    size: int


def encode_entry(request: Request, url: str) -> bytes:
    header = {
        "method": request.method,
        "path": request.path,
        "content_type": request.content_type,
        "encoding": request.encoding,
        "events": request.events,
        "kind": request.kind,
        "url": url,
        "created": time.time(),
    }
    return MAGIC + orjson.dumps(header) + b"\n" + request.body


def decode_entry(data: bytes) -> tuple[Request, str]:
    if not data.startswith(MAGIC):
        raise ValueError("not a spool file")
    end = data.index(b"\n", len(MAGIC))
    h = orjson.loads(data[len(MAGIC) : end])
    body = data[end + 1 :]
    req = Request(h["method"], h["path"], body, h["content_type"], h["encoding"], h["events"], h["kind"])
    return req, h["url"]


class Spool:
    """The spool directory of one job/worker, bounded to ``max_bytes``."""

    def __init__(
        self,
        root: Path,
        job: str,
        worker: str,
        max_bytes: int,
        problem: Callable[[str, str], None] | None = None,
    ) -> None:
        self.root = Path(root)
        self.dir = self.root / dir_name(job) / dir_name(worker)
        self.max_bytes = max_bytes
        self.problem = problem or (lambda kind, msg: None)
        self.dropped_requests = 0
        self.dropped_events = 0
        self._owner_fd: int | None = None
        self._bytes: int | None = None
        self._lock = threading.Lock()

    # -- ownership ------------------------------------------------------------------------

    def claim(self) -> bool:
        """Hold the owner lock of the directory (created if needed) for this process's life."""
        if self._owner_fd is not None:
            return True
        fd = claim_dir(self.dir)
        if fd is None:
            return False
        self._owner_fd = fd
        return True

    def release(self) -> None:
        """Give up the owner lock; the directory goes away when nothing is left in it."""
        if self._owner_fd is not None:
            release_dir(self.dir, self._owner_fd, remove=True)
            self._owner_fd = None

    # -- writing --------------------------------------------------------------------------

    def put(self, request: Request, url: str) -> Path:
        """Write one request; drop the oldest files if the directory would exceed its bound."""
        data = encode_entry(request, url)
        with self._lock:
            self._make_room(len(data))
            name = f"{time.time_ns():020d}-{os.getpid()}-{next(_counter):08d}{SUFFIX}"
            path = self.dir / name
            tmp = self.dir / f".{name}.tmp"
            for attempt in (0, 1):  # a second try if another process just removed the empty directory
                try:
                    self.dir.mkdir(parents=True, exist_ok=True, mode=0o700)
                    with open(tmp, "wb") as f:
                        f.write(data)
                    break
                except FileNotFoundError:
                    if attempt:
                        raise
            os.replace(tmp, path)
            if self._bytes is not None:
                self._bytes += len(data)
        return path

    def _make_room(self, incoming: int) -> None:
        if self._bytes is None or self._bytes + incoming > self.max_bytes:
            self._bytes = self.size()  # recount before dropping anything
        if self._bytes + incoming <= self.max_bytes:
            return
        for path in self.files():
            if self._bytes + incoming <= self.max_bytes:
                break
            entry = take(path)
            if entry is None:
                continue
            self.dropped_requests += 1
            self.dropped_events += entry.request.events
            self._bytes -= entry.size
            done(entry)
        if self.dropped_requests:
            self.problem(
                "spool-full",
                f"spool {self.dir} reached its bound of {self.max_bytes} bytes: dropped the oldest "
                f"{self.dropped_requests} request(s) ({self.dropped_events} event(s)) so far",
            )

    # -- reading --------------------------------------------------------------------------

    def files(self) -> list[Path]:
        return spool_files(self.dir)

    def size(self) -> int:
        total = 0
        for path in self.files():
            with contextlib.suppress(OSError):
                total += path.stat().st_size
        return total

    def summary(self) -> tuple[int, int]:
        """(requests, events) waiting in this directory."""
        count = events = 0
        for path in self.files():
            header = read_header(path)
            if header is None:
                continue
            count += 1
            events += int(header.get("events", 0))
        return count, events

    def forget(self, entry: Entry) -> None:
        if self._bytes is not None:
            self._bytes = max(0, self._bytes - entry.size)


def read_header(path: Path) -> dict | None:
    try:
        with open(path, "rb") as f:
            head = f.read(4096)
        end = head.index(b"\n", len(MAGIC))
        return orjson.loads(head[len(MAGIC) : end]) if head.startswith(MAGIC) else None
    except (OSError, ValueError):
        return None


def spool_files(directory: Path) -> list[Path]:
    try:
        names = [e.name for e in os.scandir(directory) if e.name.endswith(SUFFIX) and e.is_file()]
    except OSError:
        return []
    names.sort()
    return [directory / n for n in names]


def claim_dir(directory: Path) -> int | None:
    """Take the owner lock of a spool directory; None when a live process holds it."""
    directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd = os.open(directory / ".owner", os.O_RDWR | os.O_CREAT, 0o600)
    if not _lock(fd):
        os.close(fd)
        return None
    return fd


def release_dir(directory: Path, fd: int, remove: bool) -> None:
    """Drop the owner lock taken by ``claim_dir``; with ``remove``, delete the directory if empty."""
    try:
        if remove and not spool_files(directory):
            os.unlink(directory / ".owner")
            for leftover in directory.glob(".*.tmp"):
                leftover.unlink()
            directory.rmdir()
            directory.parent.rmdir()  # the job's directory, when this was its last worker
    except OSError:
        pass
    finally:
        os.close(fd)


def take(path: Path) -> Entry | None:
    """Lock a spool file for replay; None if another process has it or already removed it."""
    try:
        fd = os.open(path, os.O_RDWR)
    except OSError:
        return None
    try:
        if not _lock(fd) or os.fstat(fd).st_nlink == 0:
            os.close(fd)
            return None
        size = os.fstat(fd).st_size
        with os.fdopen(os.dup(fd), "rb") as f:
            data = f.read()
        request, url = decode_entry(data)
    except (OSError, ValueError, KeyError):
        # unreadable or foreign: leave it, but never send it
        os.close(fd)
        return None
    return Entry(path, fd, request, url, size)


def done(entry: Entry) -> None:
    """Remove a replayed (or dropped) file, then unlock it."""
    with contextlib.suppress(OSError):
        os.unlink(entry.path)
    os.close(entry.fd)


def put_back(entry: Entry) -> None:
    """Leave the file for a later replay."""
    os.close(entry.fd)


def orphan_dirs(root: Path, skip: Path | None = None) -> Iterator[Path]:
    """Spool directories (``<root>/<job>/<worker>``) with files, other than ``skip``."""
    try:
        jobs = sorted(p for p in Path(root).iterdir() if p.is_dir())
    except OSError:
        return
    for job_dir in jobs:
        try:
            workers = sorted(p for p in job_dir.iterdir() if p.is_dir())
        except OSError:
            continue
        for d in workers:
            if skip is not None and d == skip:
                continue
            if spool_files(d):
                yield d
