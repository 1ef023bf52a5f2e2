"""What every route needs, built once by ``create_app`` and reached through the request."""

from __future__ import annotations

import re
import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from fastapi import Request
from starlette.concurrency import run_in_threadpool

from ..errors import BadRequest, NotFound
from ..ingest import Committer
from ..settings import Settings
from ..store import ApiKey, Store
from ..store.files import CHUNK_BYTES, HEAD_BYTES, Files
from .access import Access
from .metrics import Metrics, Readiness
from .signing import Signer


@dataclass
class Context:
    store: Store
    settings: Settings
    signer: Signer
    access: Access
    committer: Committer
    files: FileStore
    readiness: Readiness
    metrics: Metrics | None  # None where metrics_access is 'off'


def context(request: Request) -> Context:
    return request.app.state.ctx


async def caller(request: Request) -> ApiKey:
    """FastAPI dependency: the API key of a native request. A key this replica remembers is answered on
    the event loop; only a lookup (a new key, a session cookie) takes a worker thread."""
    access = request.app.state.ctx.access
    key = access.remembered_key(request)
    return key if key is not None else await run_in_threadpool(access.native_key, request)


_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._\-/ ]{0,254}$")


@dataclass(frozen=True)
class FileBody:
    """A file to serve: its first bytes, its size, and its bytes piece by piece (read as they are taken)."""

    head: bytes
    size: int
    pieces: Callable[[], Iterator[bytes]]


class FileStore:
    """Uploaded files (debug images, artifacts), in the store (``store/files.py``), so that every replica serves
    every file. A file uploaded before files moved to the store lies in ``legacy_root`` (``<files_dir>/<job>/<name>``)
    and is still served, deleted and counted there until a file of its name is uploaded again; new uploads go to the
    store only."""

    def __init__(self, files: Files, legacy_root: Path) -> None:
        self._files = files
        self.legacy_root = Path(legacy_root)

    @staticmethod
    def check_name(name: str) -> str:
        if not _NAME.match(name) or ".." in name.split("/") or "//" in name:
            raise BadRequest("a file name is 1-255 of letters, digits, '._- /' with no '..' parts", field="name")
        return name

    def write(self, job: str, name: str, data: bytes) -> int:
        """Store ``data`` as file ``name`` of ``job``; answers its size."""
        return self._files.write(job, self.check_name(name), data).size

    def open(self, job: str, name: str) -> FileBody:
        """File ``name`` of ``job`` to serve; NotFound naming ``name`` when there is none."""
        stored = self._files.get(job, self.check_name(name))
        if stored is not None:
            return FileBody(stored.head, stored.size, lambda: self._files.chunks(stored))
        legacy = self._legacy_path(job, name)
        if not legacy.is_file():
            raise NotFound(f"file {name!r} of job {job!r} does not exist", field="name")
        with legacy.open("rb") as stream:
            head = stream.read(HEAD_BYTES)
        return FileBody(head, legacy.stat().st_size, lambda: _read_pieces(legacy))

    def delete(self, job: str, name: str) -> bool:
        """Delete file ``name`` of ``job`` (from the store, and any copy in the legacy directory); False when there
        was none."""
        deleted = self._files.delete(job, self.check_name(name))
        legacy = self._legacy_path(job, name)
        if legacy.is_file():
            legacy.unlink()
            deleted = True
        return deleted

    def delete_job(self, job: str) -> None:
        """Remove the legacy directory of ``job``; its files in the store go with its data (``Jobs.delete``)."""
        shutil.rmtree(self.legacy_root / job, ignore_errors=True)

    def usage(self, job: str) -> dict[str, int]:
        """How many files ``job`` has and their bytes, the store's and the legacy directory's of other names."""
        sizes = {stored.name: stored.size for stored in self._files.listing(job)}
        folder = self.legacy_root / job
        if folder.is_dir():
            for path in folder.rglob("*"):
                name = path.relative_to(folder).as_posix()
                if path.is_file() and name not in sizes:
                    sizes[name] = path.stat().st_size
        return {"files": len(sizes), "bytes": sum(sizes.values())}

    def _legacy_path(self, job: str, name: str) -> Path:
        return self.legacy_root / job / name


def _read_pieces(path: Path) -> Iterator[bytes]:
    with path.open("rb") as stream:
        while piece := stream.read(CHUNK_BYTES):
            yield piece


def parse_time(value: str | int | None, name: str) -> int | None:
    """Epoch milliseconds from an integer or an ISO 8601 time; BadRequest naming ``name`` otherwise."""
    if value is None or value == "":
        return None
    if isinstance(value, int):
        return value
    text = str(value).strip()
    if re.fullmatch(r"-?\d+", text):
        return int(text)
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError as exc:
        raise BadRequest(f"'{name}' must be epoch milliseconds or an ISO 8601 time, got {text!r}", field=name) from exc
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return int(moment.timestamp() * 1000)


def split_list(value: str | None) -> list[str]:
    return [part for part in (value or "").split(",") if part]


def page_args(limit: Any, name: str = "limit", maximum: int = 1000) -> int:
    try:
        number = int(limit)
    except (TypeError, ValueError) as exc:
        raise BadRequest(f"'{name}' must be an integer", field=name) from exc
    if not 1 <= number <= maximum:
        raise BadRequest(f"'{name}' must be between 1 and {maximum}", field=name)
    return number
