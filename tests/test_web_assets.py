"""web-assets/build.py takes a pinned npm package only when it matches the lock file's integrity hash."""

from __future__ import annotations

import base64
import hashlib
import importlib.util
import io
import tarfile
from pathlib import Path

import pytest

BUILD = Path(__file__).resolve().parents[1] / "web-assets" / "build.py"


def _build_module():  # noqa: ANN202 - the module web-assets/build.py
    spec = importlib.util.spec_from_file_location("web_assets_build", BUILD)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _package(tmp_path: Path) -> tuple[Path, str]:
    """A package tarball as npm packs one (files under ``package/``), and its sha512 integrity string."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        body = b"export default 1;\n"
        info = tarfile.TarInfo("package/dist/lib.js")
        info.size = len(body)
        archive.addfile(info, io.BytesIO(body))
    path = tmp_path / "lib-1.0.0.tgz"
    path.write_bytes(buffer.getvalue())
    return path, "sha512-" + base64.b64encode(hashlib.sha512(buffer.getvalue()).digest()).decode()


def test_a_package_matching_its_hash_is_read(tmp_path: Path) -> None:
    path, integrity = _package(tmp_path)
    tarball = _build_module()._tarball("lib", {"version": "1.0.0", "resolved": path.as_uri(), "integrity": integrity})
    assert tarball.extractfile("package/dist/lib.js").read() == b"export default 1;\n"


def test_a_package_not_matching_its_hash_is_refused(tmp_path: Path) -> None:
    path, _ = _package(tmp_path)
    wrong = "sha512-" + base64.b64encode(hashlib.sha512(b"something else").digest()).decode()
    with pytest.raises(RuntimeError, match="integrity"):
        _build_module()._tarball("lib", {"version": "1.0.0", "resolved": path.as_uri(), "integrity": wrong})
