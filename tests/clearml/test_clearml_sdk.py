"""The real ``clearml`` SDK (tests/clearml/requirements.txt) runs a training script against a real jobpulse
server, and everything it reported is readable through the ClearML endpoints and the native API.

The SDK's interpreter: the test's own when it has ``clearml`` at the pinned version, else
``JOBPULSE_CLEARML_PYTHON``, else a virtual environment made once under the user's cache directory.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import venv
from pathlib import Path

import httpx
import orjson
import pytest

from jobpulse.testing import running_server

HERE = Path(__file__).parent
SCRIPT = HERE / "scripts" / "train_clearml.py"
PIN = (HERE / "requirements.txt").read_text().split("==")[1].strip()
# SDK warnings about this machine, not about the server.
LOCAL_WARNINGS = re.compile(r"NVML|GPU stats|gpu monitoring", re.IGNORECASE)

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


def _has_pinned_clearml(python: str) -> bool:
    probe = [python, "-c", "import clearml, sys; sys.exit(clearml.__version__ != sys.argv[1])", PIN]
    return subprocess.run(probe, capture_output=True, timeout=120).returncode == 0


def _sdk_python() -> str:
    for candidate in (sys.executable, os.environ.get("JOBPULSE_CLEARML_PYTHON")):
        if candidate and _has_pinned_clearml(candidate):
            return candidate
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "jobpulse-tests" / f"clearml-{PIN}"
    python = cache / "bin" / "python"
    if python.exists() and _has_pinned_clearml(str(python)):
        return str(python)
    building = cache.with_name(cache.name + f".{os.getpid()}")
    shutil.rmtree(building, ignore_errors=True)
    venv.create(building, with_pip=True)
    done = subprocess.run(
        [str(building / "bin" / "python"), "-m", "pip", "install", "-q", "-r", str(HERE / "requirements.txt")],
        capture_output=True,
        text=True,
        timeout=600,
    )
    if done.returncode != 0:
        shutil.rmtree(building, ignore_errors=True)
        pytest.skip(f"could not install clearml=={PIN} (offline?): {done.stderr[-500:]}")
    shutil.rmtree(cache, ignore_errors=True)
    building.rename(cache)  # the venv's scripts keep working: python is run by path below
    return str(python)


@pytest.fixture(scope="module")
def sdk_run(tmp_path_factory):
    python = _sdk_python()
    work = tmp_path_factory.mktemp("clearml-run")
    shutil.copy(SCRIPT, work / SCRIPT.name)
    (work / "home").mkdir()
    with running_server() as server:
        token = server.api_key
        env = {k: v for k, v in os.environ.items() if not k.startswith(("CLEARML_", "TRAINS_"))}
        env.update(
            HOME=str(work / "home"),
            PYTHONUNBUFFERED="1",
            CLEARML_API_HOST=server.url,
            CLEARML_WEB_HOST=server.url,
            CLEARML_FILES_HOST=f"{server.url}/clearml/files",
            CLEARML_API_ACCESS_KEY=token.split("_")[1],
            CLEARML_API_SECRET_KEY=token,
            JOBPULSE_CLEARML_RESULT=str(work / "result.json"),
            TRAIN_PROJECT="sdk/e2e",
        )
        done = subprocess.run(
            [python, str(work / SCRIPT.name)], cwd=work, env=env, capture_output=True, text=True, timeout=240
        )
        result = orjson.loads((work / "result.json").read_bytes()) if (work / "result.json").exists() else {}
        with httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {token}"}, timeout=30) as http:
            yield done, result, http


def api(http: httpx.Client, endpoint: str, body: dict) -> dict:
    doc = http.post(f"/v2.23/{endpoint}", json=body).json()
    assert doc["meta"]["result_code"] == 200, doc["meta"]
    return doc["data"]


def test_the_script_runs_to_the_end_without_sdk_errors_or_warnings_about_the_server(sdk_run):
    done, result, _ = sdk_run
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-3000:]
    assert result["task_id"] and result["params"] == {"lr": 0.01, "epochs": 3}
    complaints = [
        line
        for line in output.splitlines()
        if re.search(r" - clearml[\w. ]* - (WARNING|ERROR) - |Traceback|Retrying|Failed", line)
        and not LOCAL_WARNINGS.search(line)
    ]
    assert complaints == []


def test_the_task_and_its_parameters(sdk_run):
    _, result, http = sdk_run
    task = api(http, "tasks.get_by_id", {"task": result["task_id"]})["task"]
    assert task["status"] == "completed" and task["name"] == "sdk training run"
    assert task["hyperparams"]["General"]["lr"]["value"] == "0.01"
    assert task["runtime"]["progress"] == "100"
    project = api(http, "projects.get_by_id", {"project": task["project"]})["project"]
    assert project["name"] == "sdk/e2e"
    job = http.get(f"/jp/v1/jobs/{result['task_id']}").json()["job"]
    assert job["status"] == "completed" and job["project"] == task["project"]


def test_every_scalar_and_the_single_value(sdk_run):
    _, result, http = sdk_run
    task_id = result["task_id"]
    raw = api(http, "events.scalar_metrics_iter_raw", {"task": task_id, "metric": {"metric": "loss"}})
    assert raw["variants"]["train"] == {"iter": list(range(20)), "y": [1.0 / (i + 1) for i in range(20)]}
    assert raw["variants"]["val"]["y"] == [-1.5 / (i + 1) for i in range(20)]
    single = api(http, "events.get_task_single_value_metrics", {"tasks": [task_id]})["tasks"][0]["values"]
    assert [(v["metric"], v["variant"], v["value"]) for v in single] == [("Summary", "accuracy", 0.93)]
    native = http.get(f"/jp/v1/jobs/{task_id}/scalars/points", params={"metric": "loss", "variant": "val"}).json()
    assert native["value"] == [-1.5 / (i + 1) for i in range(20)]


def test_the_resource_monitor_reported(sdk_run):
    _, result, http = sdk_run
    metrics = api(http, "events.get_scalar_metrics_and_variants", {"task": result["task_id"]})["metrics"]
    assert {"cpu_usage", "memory_used_gb"} <= set(metrics[":monitor:machine"])


def test_every_console_line(sdk_run):
    _, result, http = sdk_run
    events = api(
        http, "events.get_task_log", {"task": result["task_id"], "navigate_earlier": False, "batch_size": 10_000}
    )["events"]
    text = "\n".join(e["msg"] for e in events)
    for line in (
        "hello from print",
        "hello from logging.info",
        "hello from logging.warning",
        "some free text via report_text",
        *(f"progress line {i}" for i in range(5)),
        "done, closing",
    ):
        assert line in text
    native = http.get(f"/jp/v1/jobs/{result['task_id']}/logs", params={"start": "head", "limit": "1000"}).json()
    assert "progress line 4" in "\n".join(line["msg"] for line in native["lines"])


def test_the_plots(sdk_run):
    _, result, http = sdk_run
    plots = api(http, "events.get_task_plots", {"task": result["task_id"], "iters": 5})["plots"]
    by_metric = {p["metric"]: orjson.loads(p["plot_str"]) for p in plots}
    assert by_metric["plotly"]["data"][0]["y"] == [3, 1, 2]
    assert by_metric["scatter"]["data"][0]["y"] == [1, 4, 9]
    native = http.get(f"/jp/v1/jobs/{result['task_id']}/events/plot").json()["events"]
    assert {e["metric"] for e in native} == {"plotly", "scatter"}


def test_the_debug_image_is_in_the_file_store(sdk_run):
    _, result, http = sdk_run
    data = api(http, "events.debug_images", {"metrics": [{"task": result["task_id"], "metric": "image"}]})
    (event,) = data["metrics"][0]["iterations"][0]["events"]
    assert event["iter"] == 2 and event["variant"] == "rand"
    jpeg = http.get(event["url"])
    assert jpeg.status_code == 200 and jpeg.content[:2] == b"\xff\xd8"
    (native,) = http.get(f"/jp/v1/jobs/{result['task_id']}/events/image").json()["events"]
    assert http.get(native["meta"]["file"]).content == jpeg.content
