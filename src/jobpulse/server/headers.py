"""Security headers: a policy for the UI's pages, one for every other answer, and the headers of user content.

Every response gets ``X-Content-Type-Options: nosniff`` and a ``Referrer-Policy``; an HTML page gets a
Content-Security-Policy that runs scripts from this server only (no inline script; styles may be inline,
as Plotly.js sets them on its SVG) and may not be framed. The API documentation (``/docs``, ``/redoc``) runs
Swagger UI and ReDoc from this server's own files (``docs_pages.py``): scripts from 'self' only, inline styles
(both set them), and workers from blobs (ReDoc's search). Answers that are not pages get ``default-src 'none'``:
a browser that opens one renders nothing active.

Files that users uploaded are served by :func:`user_file`, streamed as the store reads them: inline only when their
first bytes are those of a PNG, JPEG, GIF or WebP image (and then as that type, whatever their name says), else as
a download (``Content-Disposition: attachment``) of a type that a browser does not render as markup or script;
always sandboxed, so no uploaded content ever runs in the UI's origin.
"""

from __future__ import annotations

import mimetypes
import re
from collections.abc import Iterable, Sequence
from urllib.parse import quote

from starlette.datastructures import MutableHeaders
from starlette.responses import StreamingResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

# Debug images may live elsewhere (an event keeps the URL its sender gave), hence images from http(s) too.
PAGE_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
    "img-src 'self' data: blob: https: http:; font-src 'self' data:; connect-src 'self'; "
    "object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)
DOCS_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
    "font-src 'self' data:; connect-src 'self'; worker-src 'self' blob:; base-uri 'none'; form-action 'self'; "
    "frame-ancestors 'none'"
)
OTHER_POLICY = "default-src 'none'; frame-ancestors 'none'"
USER_CONTENT_POLICY = "sandbox; default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'"

_COMMON = (("x-content-type-options", "nosniff"), ("referrer-policy", "same-origin"))
# No Cross-Origin-Opener-Policy: with it every navigation from another page starts a new browsing context
# group, and the browser compiles Plotly.js anew (a returning user's first interactive chart came seconds later).
_PAGE = (*_COMMON, ("content-security-policy", PAGE_POLICY), ("x-frame-options", "DENY"))
_DOCS = (*_COMMON, ("content-security-policy", DOCS_POLICY), ("x-frame-options", "DENY"))
_OTHER = (*_COMMON, ("content-security-policy", OTHER_POLICY))


class SecurityHeaders:
    """ASGI middleware adding the headers above to every HTTP answer, keeping any a route set itself."""

    def __init__(self, app: ASGIApp, docs_paths: Sequence[str | None] = ()) -> None:
        self.app = app
        self.docs_paths = tuple(p.rstrip("/") for p in docs_paths if p)

    def _is_docs(self, path: str) -> bool:
        return any(path == p or path.startswith(p + "/") for p in self.docs_paths)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        docs = self._is_docs(scope["path"])

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = list(message.get("headers", ()))
                headers = MutableHeaders(scope=message)
                page = headers.get("content-type", "").startswith("text/html")
                for name, value in (_DOCS if docs else _PAGE) if page else _OTHER:
                    if name not in headers:
                        headers.append(name, value)
            await send(message)

        await self.app(scope, receive, send_with_headers)


# Raster images a browser shows without running anything: (first bytes, media type).
_RASTER = (
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"GIF87a", "image/gif"),
    (b"GIF89a", "image/gif"),
)
# Types a browser renders as markup or runs as script; a file of such a name is served as plain bytes.
_ACTIVE = re.compile(r"^(text/(html|xml|xsl|\w*script)|application/(\w*script|xml|[\w.+-]*\+xml)|multipart/)")
SIGNATURE_BYTES = 12
_UNSAFE_NAME = re.compile(r"[^A-Za-z0-9._\- ]")


def raster_type(head: bytes) -> str | None:
    """The media type of an image that starts with ``head``, when it is on the allow-list, else None."""
    for signature, media in _RASTER:
        if head.startswith(signature):
            return media
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return "image/webp"
    return None


def disposition(kind: str, name: str) -> str:
    """A ``Content-Disposition`` value naming the file by the last part of ``name``, safe in any browser."""
    base = name.rsplit("/", 1)[-1] or "file"
    plain = _UNSAFE_NAME.sub("_", base).strip(" ") or "file"
    value = f'{kind}; filename="{plain}"'
    return value if plain == base else f"{value}; filename*=UTF-8''{quote(base, safe='')}"


def user_content_headers(name: str, head: bytes) -> tuple[str, dict[str, str]]:
    """(media type, headers) to serve user content called ``name`` whose first bytes are ``head``.

    Inline only for an allow-listed raster image recognised by its bytes; anything else is a download, and
    never of an image, markup or script type (an SVG, an HTML page, or HTML named ``x.png`` included).
    """
    headers = {"X-Content-Type-Options": "nosniff", "Content-Security-Policy": USER_CONTENT_POLICY}
    image = raster_type(head)
    if image is not None:
        headers["Content-Disposition"] = disposition("inline", name)
        return image, headers
    guessed = mimetypes.guess_type(name.rsplit("/", 1)[-1])[0] or ""
    passive = guessed and not guessed.startswith("image/") and not _ACTIVE.match(guessed)
    headers["Content-Disposition"] = disposition("attachment", name)
    return (guessed if passive else "application/octet-stream"), headers


def user_file(name: str, head: bytes, size: int, body: Iterable[bytes], cache_control: str) -> StreamingResponse:
    """A stored file uploaded as ``name`` as an answer with the headers of user content: ``head`` its first bytes
    (at least ``SIGNATURE_BYTES`` of them when it has that many), ``size`` its length, ``body`` its bytes piece by
    piece, sent as they are read (empty for a HEAD request)."""
    media, headers = user_content_headers(name, head[:SIGNATURE_BYTES])
    headers["Cache-Control"] = cache_control
    headers["Content-Length"] = str(size)
    return StreamingResponse(body, media_type=media, headers=headers)
