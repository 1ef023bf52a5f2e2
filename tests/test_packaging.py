"""The package builds as a wheel without a warning, carrying the browser code built from npm."""

from __future__ import annotations

import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from jobpulse.server.docs_pages import assets_built
from jobpulse.ui import assets

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.skipif(
    not (assets_built() and (assets.STATIC_DIR / assets.UPLOT).is_file()),
    reason="the web assets are not built: run python web-assets/build.py",
)
def test_the_wheel_builds_without_warnings_and_carries_the_browser_code(tmp_path: Path) -> None:
    argv = [sys.executable, "-m", "pip", "wheel", "-v", "--no-deps", "--no-build-isolation", "--no-cache-dir"]
    built = subprocess.run([*argv, "-w", str(tmp_path), str(ROOT)], capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, built.stderr
    # a Python warning category in the build's output (setuptools' deprecations, a data folder taken for a package)
    assert not re.findall(r"\w+Warning\b", built.stdout + built.stderr), built.stdout + built.stderr
    (wheel,) = tmp_path.glob("jobpulse-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    for name in (assets.UPLOT, assets.UPLOT_CSS, assets.PLOTLY):
        assert f"jobpulse/ui/static/{name}" in names
    assert "jobpulse/server/docs-static/swagger-ui-bundle.js" in names
