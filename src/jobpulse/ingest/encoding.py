"""Content-Encoding of request bodies: gzip and zstd, inflated no further than the body limit.

Both are inflated a slice of input at a time, so that a body that inflates past the limit is stopped within a slice
of it (deflate inflates at most about 1,000 times, a zstd block about 32,000 times). A body may hold several gzip
members or zstd frames one after the other, up to ``MAX_MEMBERS``.
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Callable
from typing import Any

import zstandard

from ..errors import BadRequest, PayloadTooLarge

MAX_MEMBERS = 1000
_STEP = {"gzip": 16 << 10, "zstd": 1 << 10}
_NOT_ZERO = re.compile(rb"[^\0]")


def decode(body: bytes, encoding: str | None, limit: int) -> bytes:
    """Undo a gzip or zstd Content-Encoding, refusing to inflate past ``limit`` bytes (413) and a corrupt or
    truncated body (400, naming the Content-Encoding)."""
    encoding = (encoding or "identity").strip().lower()
    if encoding in ("identity", ""):
        return body
    if encoding in ("gzip", "x-gzip"):
        return _inflate(body, limit, "gzip", lambda: zlib.decompressobj(wbits=31), zlib.error)
    if encoding == "zstd":
        return _inflate(body, limit, "zstd", lambda: zstandard.ZstdDecompressor().decompressobj(), zstandard.ZstdError)
    raise BadRequest(f"Content-Encoding {encoding!r} is not supported; use gzip or zstd", field="Content-Encoding")


def _inflate(body: bytes, limit: int, name: str, member: Callable[[], Any], error: type[Exception]) -> bytes:
    """The members of ``body`` (gzip members, zstd frames) inflated one after the other."""
    if not body:
        raise _corrupt(name, "the body is empty")
    view, step = memoryview(body), _STEP[name]
    parts: list[bytes] = []
    size = pos = members = 0
    try:
        while pos < len(body):
            if members and name == "gzip" and not _NOT_ZERO.search(body, pos):
                break  # zeros after the last member: padding, as gzip itself reads it
            members += 1
            if members > MAX_MEMBERS:
                raise BadRequest(f"a {name} body holds at most {MAX_MEMBERS} members", field="Content-Encoding")
            inflater = member()
            while not inflater.eof:
                if pos >= len(body):
                    raise _corrupt(name, "it ends within a member")
                chunk = view[pos : pos + step]
                part = inflater.decompress(chunk)
                pos += len(chunk) - len(inflater.unused_data)
                size += len(part)
                if size > limit:
                    raise PayloadTooLarge(f"body is larger than {limit} bytes once decoded", field="body")
                parts.append(part)
    except error as exc:
        raise _corrupt(name, str(exc)) from exc
    return b"".join(parts)


def _corrupt(name: str, why: str) -> BadRequest:
    return BadRequest(f"body is not valid {name} (Content-Encoding: {name}): {why}", field="Content-Encoding")
