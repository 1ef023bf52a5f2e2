"""Files served as they are (the UI's static files, Plotly.js, the API documentation's assets): each read once per
process, gzip-compressed once, and answered with an ETag so a browser revalidates it cheaply."""

from __future__ import annotations

import gzip
import hashlib
import mimetypes
import threading
from dataclasses import dataclass
from pathlib import Path

from starlette.requests import Request
from starlette.responses import Response

TYPES = {
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
    media = TYPES.get(path.suffix) or mimetypes.guess_type(path.name)[0] or "application/octet-stream"
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


def answer(request: Request, key: str, path: Path, cache_control: str) -> Response:
    """``path`` (cached under ``key``) as a response: 304 when the browser holds it, gzip when the browser takes it."""
    asset = _asset(key, path)
    headers = {"ETag": asset.etag, "Cache-Control": cache_control, "Vary": "Accept-Encoding"}
    if asset.etag in request.headers.get("if-none-match", ""):
        return Response(status_code=304, headers=headers)
    body = asset.body
    if asset.gzipped is not None and "gzip" in request.headers.get("accept-encoding", ""):
        body = asset.gzipped
        headers["Content-Encoding"] = "gzip"
    return Response(body, media_type=asset.media_type, headers=headers)
