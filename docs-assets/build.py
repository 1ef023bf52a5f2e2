"""Build the API documentation's assets: Swagger UI and ReDoc from npm, copied into the package.

``python docs-assets/build.py [--force]`` runs ``npm ci`` here (versions pinned by package-lock.json) and copies the
files the server needs into ``src/jobpulse/server/docs-static/`` (ignored by git), with their licenses, so
``/docs`` and ``/redoc`` work without reaching any other host; it does nothing when they were copied from the
versions the lock file pins now. ``scripts/setup`` and the wheel build run it;
without npm it says so and exits with status 1, and the server then answers /docs with how to build them.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
TARGET = HERE.parent / "src" / "jobpulse" / "server" / "docs-static"
# (file in node_modules, name in the package)
FILES = (
    ("swagger-ui-dist/swagger-ui-bundle.js", "swagger-ui-bundle.js"),
    ("swagger-ui-dist/swagger-ui.css", "swagger-ui.css"),
    ("swagger-ui-dist/favicon-32x32.png", "favicon-32x32.png"),
    ("swagger-ui-dist/LICENSE", "swagger-ui-dist.LICENSE"),
    ("swagger-ui-dist/NOTICE", "swagger-ui-dist.NOTICE"),
    ("swagger-ui-dist/swagger-ui-bundle.js.LICENSE.txt", "swagger-ui-bundle.js.LICENSE.txt"),
    ("redoc/bundles/redoc.standalone.js", "redoc.standalone.js"),
    ("redoc/bundles/redoc.standalone.js.LICENSE.txt", "redoc.standalone.js.LICENSE.txt"),
    ("redoc/LICENSE", "redoc.LICENSE"),
)


STAMP = TARGET / "package-lock.sha256"


def _lock_digest() -> str:
    return hashlib.sha256((HERE / "package-lock.json").read_bytes()).hexdigest()


def built() -> bool:
    """Whether every asset is in the package, copied from the packages the lock file pins now."""
    current = STAMP.is_file() and STAMP.read_text() == _lock_digest()
    return current and all((TARGET / name).is_file() for _, name in FILES)


def build() -> None:
    """Install the pinned packages and copy their files into the package; raise when npm is missing or fails."""
    npm = shutil.which("npm")
    if npm is None:
        raise RuntimeError("npm is not installed: install Node.js (which brings npm) to build /docs and /redoc")
    subprocess.run([npm, "ci", "--ignore-scripts", "--no-audit", "--no-fund", "--loglevel=error"], cwd=HERE, check=True)
    TARGET.mkdir(parents=True, exist_ok=True)
    for source, name in FILES:
        shutil.copyfile(HERE / "node_modules" / source, TARGET / name)
    STAMP.write_text(_lock_digest())


def main() -> int:
    if built() and "--force" not in sys.argv[1:]:
        print(f"API documentation assets up to date in {TARGET}")
        return 0
    try:
        build()
    except (RuntimeError, subprocess.CalledProcessError, OSError) as exc:
        print(f"API documentation assets not built: {exc}", file=sys.stderr)
        return 1
    print(f"API documentation assets in {TARGET}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
