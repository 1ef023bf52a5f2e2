"""Build hook: a wheel carries the API documentation's assets (Swagger UI and ReDoc, from npm).

Everything else about the package is in pyproject.toml. Before the package's files are collected, this runs
``docs-assets/build.py`` (which does nothing when the assets are current); without npm the wheel is built without them
(the server then answers /docs with how to build them) and the build says so.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent
BUILD = ROOT / "docs-assets" / "build.py"


class BuildWithDocsAssets(build_py):
    def run(self) -> None:
        # build.py does nothing when the assets are already those the lock file pins
        if BUILD.is_file() and subprocess.run([sys.executable, str(BUILD)], check=False).returncode != 0:
            print("warning: building without /docs and /redoc assets (npm unavailable)", file=sys.stderr)
        super().run()


setup(cmdclass={"build_py": BuildWithDocsAssets})
