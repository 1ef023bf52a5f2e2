"""What every route needs, built once by ``create_app`` and reached through the request."""

from __future__ import annotations

import re
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


class FileStore:
    """Uploaded files (debug images, artifacts) in a directory, one folder per job."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)

    def path(self, job: str, name: str) -> Path:
        if not _NAME.match(name) or ".." in name.split("/") or "//" in name:
            raise BadRequest("a file name is 1-255 of letters, digits, '._- /' with no '..' parts", field="name")
        return self.root / job / name

    def write(self, job: str, name: str, data: bytes) -> int:
        path = self.path(job, name)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".part")
        tmp.write_bytes(data)
        tmp.replace(path)
        return len(data)

    def read_path(self, job: str, name: str) -> Path:
        path = self.path(job, name)
        if not path.is_file():
            raise NotFound(f"file {name!r} of job {job!r} does not exist", field="name")
        return path

    def delete_job(self, job: str) -> None:
        import shutil

        shutil.rmtree(self.root / job, ignore_errors=True)

    def usage(self, job: str) -> dict[str, int]:
        folder = self.root / job
        files = [p for p in folder.rglob("*") if p.is_file()] if folder.is_dir() else []
        return {"files": len(files), "bytes": sum(p.stat().st_size for p in files)}


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
