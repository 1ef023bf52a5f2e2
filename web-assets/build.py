"""Build the browser code the server serves from its own package: uPlot (the web UI's charts), Plotly.js (the Plotly
figures jobs report), Swagger UI and ReDoc (``/docs`` and ``/redoc``), from npm.

``python web-assets/build.py [--force]`` downloads the packages ``package-lock.json`` pins from the npm registry
(``NPM_CONFIG_REGISTRY``, else registry.npmjs.org), checks each against the lock file's integrity hash, and copies
the files the server needs, with their licenses, into the package (both folders are ignored by git):
``src/jobpulse/ui/static/third-party/`` and ``src/jobpulse/server/docs-static/``. Only Python is needed: the files
taken are the packages' own prebuilt bundles, so no dependency is installed and Node.js is not used. It does
nothing when they were copied from the versions the lock file pins now. ``scripts/setup`` and the wheel build run
it; when the registry cannot be reached it says so and exits with status 1, and the server then answers the chart
pages and ``/docs`` with how to build them.
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import os
import sys
import tarfile
import urllib.error
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent
PACKAGE = HERE.parent / "src" / "jobpulse"
# folder in the package -> (file in node_modules, name in that folder). The folders' names are no Python identifiers:
# setuptools finds the package's folders before the wheel build runs this script, and takes a folder it did not
# find whose name could be imported for a package it was not told of (a warning on every install).
TARGETS: dict[Path, tuple[tuple[str, str], ...]] = {
    PACKAGE / "ui" / "static" / "third-party": (
        ("uplot/dist/uPlot.esm.js", "uPlot.esm.js"),
        ("uplot/dist/uPlot.min.css", "uPlot.min.css"),
        ("uplot/LICENSE", "uPlot.LICENSE"),
        ("plotly.js-dist-min/plotly.min.js", "plotly.min.js"),
        ("plotly.js-dist-min/LICENSE", "plotly.js.LICENSE"),
    ),
    PACKAGE / "server" / "docs-static": (
        ("swagger-ui-dist/swagger-ui-bundle.js", "swagger-ui-bundle.js"),
        ("swagger-ui-dist/swagger-ui.css", "swagger-ui.css"),
        ("swagger-ui-dist/favicon-32x32.png", "favicon-32x32.png"),
        ("swagger-ui-dist/LICENSE", "swagger-ui-dist.LICENSE"),
        ("swagger-ui-dist/NOTICE", "swagger-ui-dist.NOTICE"),
        ("swagger-ui-dist/swagger-ui-bundle.js.LICENSE.txt", "swagger-ui-bundle.js.LICENSE.txt"),
        ("redoc/bundles/redoc.standalone.js", "redoc.standalone.js"),
        ("redoc/bundles/redoc.standalone.js.LICENSE.txt", "redoc.standalone.js.LICENSE.txt"),
        ("redoc/LICENSE", "redoc.LICENSE"),
    ),
}
STAMP = "package-lock.sha256"  # in each folder: the lock file its files were copied from


def _lock_digest() -> str:
    return hashlib.sha256((HERE / "package-lock.json").read_bytes()).hexdigest()


def built() -> bool:
    """Whether every file is in the package, copied from the packages the lock file pins now."""
    digest = _lock_digest()
    for target, files in TARGETS.items():
        stamp = target / STAMP
        if not (stamp.is_file() and stamp.read_text() == digest):
            return False
        if not all((target / name).is_file() for _, name in files):
            return False
    return True


def build() -> None:
    """Download the pinned packages and copy their files into the package; raise where one cannot be had."""
    packages = json.loads((HERE / "package-lock.json").read_text())["packages"]
    tarballs: dict[str, tarfile.TarFile] = {}
    digest = _lock_digest()
    for target, files in TARGETS.items():
        target.mkdir(parents=True, exist_ok=True)
        for source, name in files:
            package, _, member = source.partition("/")
            if package not in tarballs:
                tarballs[package] = _tarball(package, packages[f"node_modules/{package}"])
            found = tarballs[package].extractfile(f"package/{member}")
            if found is None:
                raise RuntimeError(f"{package} has no file {member}")
            (target / name).write_bytes(found.read())
        (target / STAMP).write_text(digest)


def _tarball(name: str, pinned: dict) -> tarfile.TarFile:
    """The package ``name`` at the version the lock file pins, checked against its integrity hash."""
    registry = os.environ.get("NPM_CONFIG_REGISTRY", "https://registry.npmjs.org/").rstrip("/")
    url = pinned.get("resolved") or f"{registry}/{name}/-/{name}-{pinned['version']}.tgz"
    with urllib.request.urlopen(url, timeout=120) as response:
        data = response.read()
    algorithm, _, expected = pinned["integrity"].partition("-")
    if base64.b64encode(hashlib.new(algorithm, data).digest()).decode() != expected:
        raise RuntimeError(f"{url} does not match the lock file's integrity hash")
    return tarfile.open(fileobj=io.BytesIO(data), mode="r:gz")


def main() -> int:
    folders = ", ".join(str(target) for target in TARGETS)
    if built() and "--force" not in sys.argv[1:]:
        print(f"web assets up to date in {folders}")
        return 0
    try:
        build()
    except (RuntimeError, OSError, KeyError, tarfile.TarError, urllib.error.URLError) as exc:
        print(f"web assets (the UI's charts and plots, /docs and /redoc) not built: {exc}", file=sys.stderr)
        return 1
    print(f"web assets in {folders}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
