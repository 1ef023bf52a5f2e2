"""The server serves the wheel of its own SDK, so training nodes install it with pip from the server."""

from __future__ import annotations

import base64
import hashlib
import io
import subprocess
import sys
import urllib.request
import zipfile
from pathlib import Path

import orjson
import pytest
from starlette.testclient import TestClient

from jobpulse.server.routes.sdk import SdkWheel, wheel_name
from jobpulse.testing import running_server
from jobpulse.version import __version__

WHEEL = wheel_name()
INFO = f"jobpulse-{__version__}.dist-info"


def test_the_wheel_needs_no_key_and_names_jobpulse_and_its_version(anonymous: TestClient) -> None:
    response = anonymous.get(f"/jp/v1/sdk/{WHEEL}")
    assert response.status_code == 200
    assert WHEEL in response.headers["content-disposition"]
    wheel = zipfile.ZipFile(io.BytesIO(response.content))
    metadata = wheel.read(f"{INFO}/METADATA").decode()
    assert "Name: jobpulse\n" in metadata and f"Version: {__version__}\n" in metadata
    assert "Tag: py3-none-any" in wheel.read(f"{INFO}/WHEEL").decode()
    assert "jobpulse = jobpulse.cli:main" in wheel.read(f"{INFO}/entry_points.txt").decode()
    assert {"jobpulse/__init__.py", "jobpulse/sdk/run.py"} <= set(wheel.namelist())
    assert not [name for name in wheel.namelist() if "__pycache__" in name or name.endswith(".pyc")]


def test_the_wheels_record_holds_every_file_with_its_hash(anonymous: TestClient) -> None:
    wheel = zipfile.ZipFile(io.BytesIO(anonymous.get(f"/jp/v1/sdk/{WHEEL}").content))
    rows = [line.split(",") for line in wheel.read(f"{INFO}/RECORD").decode().splitlines()]
    recorded = {name: (digest, size) for name, digest, size in rows}
    assert set(recorded) == set(wheel.namelist())
    for name, (digest, size) in recorded.items():
        if name.endswith("RECORD"):
            continue
        data = wheel.read(name)
        expected = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        assert (digest, size) == (f"sha256={expected}", str(len(data))), name


def test_the_stable_address_redirects_to_the_versioned_wheel(anonymous: TestClient) -> None:
    response = anonymous.get("/jp/v1/sdk/wheel", follow_redirects=False)
    assert response.status_code == 307 and response.headers["location"].endswith(f"/jp/v1/sdk/{WHEEL}")


def test_the_index_gives_the_pip_command(anonymous: TestClient) -> None:
    body = anonymous.get("/jp/v1/sdk").json()
    assert body["version"] == __version__ and body["wheel"] == WHEEL
    assert body["install"] == f"pip install {body['url']}" and body["url"].endswith(f"/jp/v1/sdk/{WHEEL}")


def test_another_file_name_is_a_404_naming_the_wheel_served(anonymous: TestClient) -> None:
    response = anonymous.get("/jp/v1/sdk/jobpulse-0.0.1-py3-none-any.whl")
    assert response.status_code == 404
    assert WHEEL in response.json()["error"]["message"] and response.json()["error"]["field"] == "filename"


def test_the_wheel_is_built_once_and_again_when_the_package_changes(tmp_path: Path) -> None:
    package = tmp_path / "jobpulse"
    package.mkdir()
    (package / "__init__.py").write_text("x = 1\n")
    wheel = SdkWheel(tmp_path / "sdk", package=package)
    first = wheel.path()
    built = first.stat().st_mtime_ns
    assert wheel.path().stat().st_mtime_ns == built
    (package / "extra.py").write_text("y = 2\n")
    assert "jobpulse/extra.py" in zipfile.ZipFile(wheel.path()).namelist()


@pytest.mark.e2e
@pytest.mark.slow
def test_pip_installs_the_sdk_from_a_running_server(tmp_path: Path) -> None:
    target = tmp_path / "site"
    with running_server() as server:
        with urllib.request.urlopen(f"{server.url}/jp/v1/sdk", timeout=30) as response:
            url = orjson.loads(response.read())["url"]
        command = [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-index"]
        result = subprocess.run(
            [*command, "--target", str(target), url],
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert result.returncode == 0, result.stderr
    assert (target / "jobpulse" / "sdk" / "run.py").is_file()
    version = (target / INFO / "METADATA").read_text()
    assert f"Version: {__version__}" in version
    check = [sys.executable, "-c", "import jobpulse.version as v; print(v.__version__, v.__file__)"]
    shown = subprocess.run(check, capture_output=True, text=True, env={"PYTHONPATH": str(target)}, timeout=60)
    assert shown.stdout.split() == [__version__, str(target / "jobpulse" / "version.py")], shown.stderr
