"""The SDK for training nodes, served by the server itself: ``pip install http://HOST:PORT/jp/v1/sdk/wheel``.

The wheel is the ``jobpulse`` package this server runs (its base install is the SDK and the agent), zipped
from the installed files with the installed distribution's metadata, so it needs no build tools, no network
and no source tree. It is written on first request into ``<data_dir>/sdk/`` and rebuilt only when the
installed files change. It holds no secrets (no key, no setting), so it is served without authentication:
a node that has no key yet can install it.
"""

from __future__ import annotations

import base64
import hashlib
import importlib.metadata
import os
import tempfile
import threading
import zipfile
from pathlib import Path

from fastapi import APIRouter, FastAPI, Request
from starlette.concurrency import run_in_threadpool
from starlette.responses import FileResponse, RedirectResponse

from ...errors import JobpulseError, NotFound
from ...version import __version__
from ..responses import JSON

router = APIRouter(prefix="/jp/v1/sdk", tags=["sdk"])
PACKAGE = Path(__file__).resolve().parents[2]  # src/jobpulse
_SKIPPED_DIRS = {"__pycache__"}
_SKIPPED_SUFFIXES = (".pyc", ".pyo")
_ENTRY_POINTS = "[console_scripts]\njobpulse = jobpulse.cli:main\n"


class WheelUnavailable(JobpulseError):
    status = 503
    code = "sdk_unavailable"


def wheel_name(version: str = __version__) -> str:
    """The file name of the SDK's wheel for ``version`` (pure Python, any platform)."""
    return f"jobpulse-{version}-py3-none-any.whl"


class SdkWheel:
    """The SDK's wheel in ``directory``, built once per version and set of installed files."""

    def __init__(self, directory: Path, package: Path = PACKAGE) -> None:
        self.directory = Path(directory)
        self.package = package
        self.name = wheel_name()
        self._lock = threading.Lock()

    def path(self) -> Path:
        """The wheel's path, building it first when it is missing or the installed files changed."""
        target = self.directory / self.name
        stamp = self.directory / (self.name + ".stamp")
        with self._lock:
            files = self._files()
            key = _fingerprint(self.package, files)
            if target.is_file() and stamp.is_file() and stamp.read_text() == key:
                return target
            try:
                self.directory.mkdir(parents=True, exist_ok=True)
                self._write(target, files)
                stamp.write_text(key)
            except OSError as exc:
                raise WheelUnavailable(f"the SDK wheel could not be written to {self.directory}: {exc}") from exc
            return target

    def _files(self) -> list[Path]:
        found = []
        for root, dirs, names in os.walk(self.package):
            dirs[:] = sorted(d for d in dirs if d not in _SKIPPED_DIRS)
            found += [Path(root) / n for n in sorted(names) if not n.endswith(_SKIPPED_SUFFIXES)]
        return found

    def _write(self, target: Path, files: list[Path]) -> None:
        info = f"jobpulse-{__version__}.dist-info"
        metadata, entry_points = _distribution_texts()
        record: list[str] = []
        handle, temporary = tempfile.mkstemp(dir=self.directory, suffix=".part")
        os.close(handle)
        try:
            with zipfile.ZipFile(temporary, "w", compression=zipfile.ZIP_DEFLATED) as wheel:

                def add(arcname: str, data: bytes) -> None:
                    wheel.writestr(arcname, data)
                    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
                    record.append(f"{arcname},sha256={digest},{len(data)}")

                for file in files:
                    add("jobpulse/" + file.relative_to(self.package).as_posix(), file.read_bytes())
                add(f"{info}/METADATA", metadata.encode())
                add(f"{info}/WHEEL", _WHEEL.encode())
                add(f"{info}/entry_points.txt", entry_points.encode())
                add(f"{info}/top_level.txt", b"jobpulse\n")
                wheel.writestr(f"{info}/RECORD", "\n".join([*record, f"{info}/RECORD,,", ""]))
            os.replace(temporary, target)
        finally:
            if os.path.exists(temporary):
                os.unlink(temporary)


_WHEEL = "Wheel-Version: 1.0\nGenerator: jobpulse server\nRoot-Is-Purelib: true\nTag: py3-none-any\n"


def _fingerprint(package: Path, files: list[Path]) -> str:
    """A digest of the installed files' names, sizes and modification times, and of the version."""
    digest = hashlib.sha256(__version__.encode())
    for file in files:
        stat = file.stat()
        digest.update(f"{file.relative_to(package)}\0{stat.st_size}\0{stat.st_mtime_ns}\n".encode())
    return digest.hexdigest()


def _distribution_texts() -> tuple[str, str]:
    """(METADATA, entry_points.txt) of the installed distribution, or minimal ones when it is not installed."""
    try:
        dist = importlib.metadata.distribution("jobpulse")
    except importlib.metadata.PackageNotFoundError:
        dist = None
    metadata = dist.read_text("METADATA") if dist is not None and dist.version == __version__ else None
    if metadata:
        return metadata, dist.read_text("entry_points.txt") or _ENTRY_POINTS
    requires = "".join(f"Requires-Dist: {r}\n" for r in ("orjson>=3.9", "zstandard>=0.22", "psutil>=5.9"))
    metadata = f"Metadata-Version: 2.1\nName: jobpulse\nVersion: {__version__}\nRequires-Python: >=3.11\n{requires}"
    return metadata, _ENTRY_POINTS


def install(app: FastAPI, directory: Path) -> None:
    """Serve the SDK's wheel from ``directory`` (built there on first request)."""
    app.state.sdk_wheel = SdkWheel(directory)
    app.include_router(router)


def _wheel(request: Request) -> SdkWheel:
    return request.app.state.sdk_wheel


@router.get("", summary="The SDK's wheel for training nodes: its name, URL and the pip command that installs it")
async def sdk_index(request: Request) -> JSON:
    name = _wheel(request).name
    url = str(request.url_for("sdk_file", filename=name))
    return JSON(
        {
            "version": __version__,
            "wheel": name,
            "url": url,
            "latest": str(request.url_for("sdk_latest")),
            "install": f"pip install {url}",
        }
    )


@router.get(
    "/wheel",
    summary="Redirects to the SDK's wheel of this server's version",
    status_code=307,
    response_class=RedirectResponse,
    responses={307: {"description": "the wheel's versioned URL, in Location"}},
)
async def sdk_latest(request: Request) -> RedirectResponse:
    return RedirectResponse(request.url_for("sdk_file", filename=_wheel(request).name), status_code=307)


@router.get(
    "/{filename}",
    summary="The SDK's wheel (no key needed: it holds no secrets)",
    response_class=FileResponse,
    responses={404: {"description": "not the wheel of this server's version"}},
)
async def sdk_file(request: Request, filename: str) -> FileResponse:
    wheel = _wheel(request)
    if filename != wheel.name:
        raise NotFound(f"no such file: this server serves {wheel.name} (GET /jp/v1/sdk/wheel)", field="filename")
    path = await run_in_threadpool(wheel.path)
    return FileResponse(
        path,
        media_type="application/zip",  # as a wheel is; also kept out of the gzip layer, which would gain nothing
        filename=wheel.name,
        headers={"Cache-Control": "no-cache"},
    )
