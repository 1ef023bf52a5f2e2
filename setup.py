"""Build hook: a wheel carries the browser code built from npm: uPlot (the UI's charts), Swagger UI and ReDoc.

Everything else about the package is in pyproject.toml. Before the package's files are collected, this runs
``web-assets/build.py`` (which does nothing when the assets are current); without the npm registry the wheel is built
without them (the chart pages and /docs then say how to build them) and the build says so.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent
BUILD = ROOT / "web-assets" / "build.py"


class BuildWithWebAssets(build_py):
    def run(self) -> None:
        # build.py does nothing when the assets are already those the lock file pins
        if BUILD.is_file() and subprocess.run([sys.executable, str(BUILD)], check=False).returncode != 0:
            print(
                "warning: building without the web assets: the UI's charts, /docs, /redoc (npm registry unreachable)",
                file=sys.stderr,
            )
        super().run()


setup(cmdclass={"build_py": BuildWithWebAssets})
