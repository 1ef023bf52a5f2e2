"""Debug images: what the caller hands over, and its conversion to an encoded file.

``snapshot`` runs in the caller and only copies what could change afterwards (an array,
a PIL image); ``encode_image`` runs in the sender thread and produces the bytes and the
file extension. Arrays are written as PNG by a small encoder here, so neither PIL nor
numpy is needed unless the caller uses them.
"""

from __future__ import annotations

import re
import struct
import zlib
from pathlib import Path

from jobpulse.sdk.transport import quote
from jobpulse.sdk.wire import Request

_SAFE = re.compile(r"[^A-Za-z0-9_.-]+")
_MAGIC = (
    (b"\x89PNG\r\n\x1a\n", "png"),
    (b"\xff\xd8\xff", "jpg"),
    (b"GIF87a", "gif"),
    (b"GIF89a", "gif"),
    (b"RIFF", "webp"),
)


def snapshot(image: object) -> object:
    """A copy of ``image`` that later changes by the caller cannot affect."""
    if isinstance(image, str | Path | bytes):
        return image
    if isinstance(image, bytearray | memoryview):
        return bytes(image)
    detach = getattr(image, "detach", None)  # torch tensors
    if callable(detach):
        image = detach().cpu().numpy()
    copy = getattr(image, "copy", None)
    if callable(copy):
        return copy()
    return image


def encode_image(image: object) -> tuple[bytes, str]:
    """(encoded bytes, extension) of a path, encoded bytes, PIL image or array."""
    if isinstance(image, str | Path):
        path = Path(image)
        data = path.read_bytes()
        ext = path.suffix.lstrip(".").lower() or _sniff(data)
        return data, ext
    if isinstance(image, bytes):
        return image, _sniff(image)
    if hasattr(image, "save") and hasattr(image, "mode"):  # PIL.Image.Image
        import io

        buf = io.BytesIO()
        image.save(buf, format="PNG")  # type: ignore[attr-defined]
        return buf.getvalue(), "png"
    if hasattr(image, "shape") and hasattr(image, "dtype"):
        return array_png(image), "png"
    raise TypeError(f"an image must be a path, encoded bytes, a PIL image or an array, not {type(image).__name__}")


def _sniff(data: bytes) -> str:
    for magic, ext in _MAGIC:
        if data.startswith(magic):
            return ext
    return "bin"


def array_png(array: object) -> bytes:
    """PNG of an HxW, HxWxC (C in 1, 3, 4) or CxHxW array; floats are taken as 0..1."""
    import numpy as np

    a = np.asarray(array)
    if a.ndim == 3 and a.shape[0] in (1, 3, 4) and a.shape[-1] not in (1, 3, 4):
        a = np.moveaxis(a, 0, -1)  # CHW -> HWC
    if a.ndim == 3 and a.shape[-1] == 1:
        a = a[..., 0]
    if a.ndim not in (2, 3) or (a.ndim == 3 and a.shape[-1] not in (3, 4)) or 0 in a.shape:
        raise ValueError(f"cannot make an image of an array of shape {a.shape}")
    if a.dtype == np.bool_:
        a = a.astype(np.uint8) * 255
    elif a.dtype.kind == "f":
        a = np.clip(np.nan_to_num(a, nan=0.0), 0.0, 1.0) * 255.0 + 0.5
        a = a.astype(np.uint8)
    elif a.dtype != np.uint8:
        a = np.clip(a, 0, 255).astype(np.uint8)
    height, width = a.shape[:2]
    color = 0 if a.ndim == 2 else (2 if a.shape[-1] == 3 else 6)  # gray, RGB, RGBA
    rows = np.ascontiguousarray(a).reshape(height, -1)
    raw = np.hstack([np.zeros((height, 1), np.uint8), rows]).tobytes()  # filter type 0 per row

    def chunk(tag: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + tag + data + struct.pack(">I", zlib.crc32(tag + data))

    header = struct.pack(">IIBBBBB", width, height, 8, color, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(raw, 6)) + chunk(b"IEND", b"")


def file_name(metric: str, variant: str, it: int, key: str, ext: str) -> str:
    """A deterministic file name for an image, so that a resent upload replaces the first."""
    stem = _SAFE.sub("_", key).strip("._")[:150] or "image"
    digest = zlib.crc32(f"{metric}\0{variant}\0{it}\0{key}".encode()) & 0xFFFFFFFF
    return f"{stem}-{digest:08x}.{ext or 'bin'}"


_MIME = {"png": "image/png", "jpg": "image/jpeg", "jpeg": "image/jpeg", "gif": "image/gif", "webp": "image/webp"}


def image_upload(job_path: str, metric: str, variant: str, it: int, key: str, data: bytes, ext: str) -> Request:
    """The upload of an encoded image to the files of the job at ``job_path`` (``/jp/v1/jobs/{job}``)."""
    path = f"{job_path}/files/{quote(file_name(metric, variant, it, key, ext))}"
    return Request("PUT", path, data, _MIME.get(ext, "application/octet-stream"), kind="file")
