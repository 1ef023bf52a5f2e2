"""Splitting a request the server refused as too large (413) in two.

The sender (``jobpulse.sdk.answers``) and ``jobpulse sync`` (``jobpulse.sdk.sync``) send
the halves instead, each halved again if need be. A request's events keep their fields
(``ts``, ``seq``, ...), so the halves store exactly what the whole would have.
"""

from __future__ import annotations

from dataclasses import replace

import orjson

from jobpulse.sdk.arrow import CONTENT_TYPE as ARROW_TYPE
from jobpulse.sdk.arrow import load as load_arrow
from jobpulse.sdk.values import JSON_OPTS
from jobpulse.sdk.wire import Request


def split_request(request: Request) -> list[Request] | None:
    """An ingest request as two, each with about half of its events; None when it cannot be split.

    For a server that refuses a request as too large (413). The events keep their fields
    (``ts``, ``seq``, ...), so sending both halves stores exactly what the whole would have.
    """
    if request.kind != "ingest" or request.events < 2 or request.encoding not in ("", "zstd"):
        return None
    if request.content_type == ARROW_TYPE:
        encoder = load_arrow()
        halves = encoder.split(request.body) if encoder is not None and not request.encoding else None
        if halves is None:
            return None
        return [replace(request, body=data, events=count, meta=dict(request.meta)) for data, count in halves]
    body = request.body
    try:
        if request.encoding == "zstd":
            import zstandard

            body = zstandard.ZstdDecompressor().decompressobj().decompress(body)
        if request.content_type == "application/json":
            parts = _split_columnar(orjson.loads(body))
        else:
            parts = _split_lines(body)
    except (ValueError, TypeError, KeyError, orjson.JSONDecodeError, ImportError, RuntimeError):
        return None
    if parts is None:
        return None
    out = []
    for data, count in parts:
        encoding = ""
        if request.encoding == "zstd":
            import zstandard

            data, encoding = zstandard.ZstdCompressor(level=3).compress(data), "zstd"
        out.append(replace(request, body=data, encoding=encoding, events=count, meta=dict(request.meta)))
    return out


def _series_length(series: dict) -> int:
    return max((len(v) for v in series.values() if isinstance(v, list)), default=0)


def _split_columnar(doc: dict) -> list[tuple[bytes, int]] | None:
    series = doc["series"]
    total = sum(_series_length(one) for one in series)
    if total < 2:
        return None
    half = total // 2
    first: list[dict] = []
    second: list[dict] = []
    seen = 0
    for one in series:
        n = _series_length(one)
        if seen + n <= half:
            first.append(one)
        elif seen >= half:
            second.append(one)
        else:  # this series holds the middle: cut its arrays
            cut = half - seen
            first.append({k: v[:cut] if isinstance(v, list) else v for k, v in one.items()})
            second.append({k: v[cut:] if isinstance(v, list) else v for k, v in one.items()})
        seen += n
    return [
        (orjson.dumps({**doc, "series": part}, option=JSON_OPTS), count)
        for part, count in ((first, half), (second, total - half))
    ]


def _split_lines(body: bytes) -> list[tuple[bytes, int]] | None:
    lines = [line for line in body.split(b"\n") if line.strip()]
    if len(lines) < 2:
        return None
    half = len(lines) // 2
    return [(b"\n".join(part) + b"\n", len(part)) for part in (lines[:half], lines[half:])]
