"""Static files of the UI (uPlot among them, built from npm into ``static/vendor/``) and the Plotly.js bundle of the
installed ``plotly`` package.

Files are read once per process, gzip-compressed once, and answered with an ETag so a
browser revalidates them cheaply.
"""

from __future__ import annotations

import functools
import gzip
import hashlib
import mimetypes
import re
import threading
from dataclasses import dataclass
from pathlib import Path

from starlette.requests import Request
from starlette.responses import Response

from ..errors import NotFound

STATIC_DIR = Path(__file__).parent / "static"
# uPlot, the charts' library: ``web-assets/build.py`` copies it from npm (git ignores it)
UPLOT = "vendor/uPlot.esm.js"
UPLOT_CSS = "vendor/uPlot.min.css"
BUILD_HINT = "python web-assets/build.py"
_TYPES = {
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
    ".html": "text/html; charset=utf-8",
}


@dataclass(frozen=True)
class Asset:
    body: bytes
    gzipped: bytes | None
    media_type: str
    etag: str


_cache: dict[str, Asset] = {}
_lock = threading.Lock()


def _build(path: Path) -> Asset:
    body = path.read_bytes()
    media = _TYPES.get(path.suffix) or mimetypes.guess_type(path.name)[0] or "application/octet-stream"
    compressible = media.startswith("text/") or media.endswith(("javascript", "json", "svg+xml"))
    gzipped = gzip.compress(body, compresslevel=6, mtime=0) if compressible and len(body) > 512 else None
    return Asset(body, gzipped, media, '"' + hashlib.sha256(body).hexdigest()[:20] + '"')


def _asset(key: str, path: Path) -> Asset:
    found = _cache.get(key)
    if found is None:
        with _lock:
            found = _cache.get(key)
            if found is None:
                found = _cache[key] = _build(path)
    return found


def plotly_path() -> Path:
    """The minified Plotly.js that the ``plotly`` Python package ships."""
    import plotly

    path = Path(plotly.__file__).parent / "package_data" / "plotly.min.js"
    if not path.is_file():
        raise NotFound("plotly.min.js is missing from the installed plotly package")
    return path


def static_path(name: str) -> Path:
    path = (STATIC_DIR / name).resolve()
    if STATIC_DIR.resolve() not in path.parents or not path.is_file():
        raise NotFound(f"no UI file {name!r}", field="name")
    return path


def answer(request: Request, key: str, path: Path, cache_control: str) -> Response:
    """``path`` as a response: 304 when the browser holds it, gzip when the browser takes it."""
    asset = _asset(key, path)
    headers = {"ETag": asset.etag, "Cache-Control": cache_control, "Vary": "Accept-Encoding"}
    if asset.etag in request.headers.get("if-none-match", ""):
        return Response(status_code=304, headers=headers)
    body = asset.body
    if asset.gzipped is not None and "gzip" in request.headers.get("accept-encoding", ""):
        body = asset.gzipped
        headers["Content-Encoding"] = "gzip"
    return Response(body, media_type=asset.media_type, headers=headers)


_IMPORT = re.compile(r'^\s*import\s[^;]*?from\s+"\./([\w./-]+\.js)"', re.MULTILINE)


@functools.cache
def module_deps(entry: str) -> tuple[str, ...]:
    """Every module ``entry`` imports, directly or not, so a page can ask for all of them at once (a module missing
    from the package among them: see :func:`missing`)."""
    seen: list[str] = []
    todo = [entry]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.append(name)
        if (STATIC_DIR / name).is_file():
            todo.extend(_IMPORT.findall((STATIC_DIR / name).read_text()))
    return tuple(sorted(seen[1:]))


def missing(names: tuple[str, ...]) -> tuple[str, ...]:
    """Those of ``names`` not in the package (uPlot before ``web-assets/build.py`` has run)."""
    return tuple(name for name in names if not (STATIC_DIR / name).is_file())


@functools.cache
def version() -> str:
    """A short hash of the static files, to make their URLs change when they change."""
    digest = hashlib.sha256()
    for path in sorted(STATIC_DIR.rglob("*")):
        if path.is_file():
            digest.update(path.name.encode() + path.read_bytes())
    return digest.hexdigest()[:12]
